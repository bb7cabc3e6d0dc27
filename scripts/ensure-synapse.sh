#!/usr/bin/env bash
# A real Matrix homeserver for the tests: Debian sid's matrix-synapse (1.160 on this mirror), built
# once into a local Docker image and cached. No registry exists here, so nothing is pulled: the root
# is made by mmdebstrap from Debian's mirror and `docker import`ed. Bookworm has no Synapse and Debian
# no Conduit or Dendrite (/work/shared/FACTS.md, "Real counterparts"). 3 minutes here (18 were
# measured on a loaded machine), the first time only; afterwards it exits at once.
# Run by make test before the suite; the tests start one container per file (test/helpers/synapse.ts),
# which writes its own homeserver.yaml. Prints the image's name; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

# The build's revision names the image: a change to what is built here makes a new one everywhere.
# test/helpers/synapse.ts names the same tag.
IMAGE=berth-test-synapse:r1
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE"
  exit 0
fi

die() { echo "berth: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "building the test Synapse needs root (mmdebstrap); run make test as root"
command -v mmdebstrap >/dev/null 2>&1 || { . ./scripts/apt-install.sh; apt_install mmdebstrap; } >&2
command -v docker >/dev/null 2>&1 || die "docker is needed to import the test Synapse image"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/berth-synapse-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The mirror is a dated snapshot: without Check-Valid-Until=false apt says "Release file ... is expired".
# Docs, man pages and locales are left out (about a third of the root); Synapse needs none of them.
echo "berth: building the test Synapse image from Debian sid, once (3-20 minutes) ..." >&2
nice -n 10 mmdebstrap --variant=apt --include=matrix-synapse,ca-certificates \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='chroot "$1" id matrix-synapse' \
  --customize-hook="chroot \"\$1\" id -u matrix-synapse >$WORK/uid && chroot \"\$1\" id -g matrix-synapse >$WORK/gid" \
  --customize-hook='chroot "$1" sh -c "install -d -o matrix-synapse -g \$(id -g matrix-synapse) -m 0750 /data"' \
  sid "$WORK/root.tar" http://deb.debian.org/debian >&2 || die "mmdebstrap failed (see above)"

# /data (made above, owned by Debian's matrix-synapse system user) holds the helper's homeserver.yaml,
# written at the start, and Synapse's SQLite database and media; the image's command runs Synapse
# from there as that user (by number: the user has no group of its own).
docker import \
  --change 'ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1' \
  --change 'WORKDIR /data' \
  --change "USER $(cat "$WORK/uid"):$(cat "$WORK/gid")" \
  --change 'CMD ["python3", "-m", "synapse.app.homeserver", "--config-path", "/data/homeserver.yaml"]' \
  --change 'LABEL berth.test=synapse' \
  "$WORK/root.tar" "$IMAGE" >/dev/null || die "docker import failed"
docker run --rm --network none --user root "$IMAGE" python3 -c 'import synapse; print("berth: Synapse", synapse.__version__)' >&2
echo "$IMAGE"
