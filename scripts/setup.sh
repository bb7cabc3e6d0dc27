#!/usr/bin/env bash
# What running berth needs ("make run"), on a fresh machine: npm packages, the build, a Docker
# engine, Debian's static busybox and gcc, and berth's offline images. What only the tests need
# is scripts/setup-test.sh's ("make test"). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/apt-install.sh
. ./scripts/apt-install.sh

# A supported Node first (the machine's, or Node 24 into .node/): everything below runs on it.
./scripts/ensure-node.sh
export PATH="$PWD/.node/bin:$PATH"

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "berth: installing npm packages ..."
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "berth: building ..."
npm run --silent build

./scripts/ensure-docker.sh

if command -v dpkg >/dev/null 2>&1 && ! dpkg -s busybox-static >/dev/null 2>&1; then
  apt_install busybox-static
fi

# curl: the example "make run" prints.
command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates
# gcc builds berth-bridge, the static stdio-to-socket bridge in the shell image.
{ command -v gcc >/dev/null 2>&1 && [ -f /usr/include/stdio.h ]; } || apt_install gcc libc6-dev
# disk_quotas: loop: ext4 images, loop-mounted.
{ command -v mkfs.ext4 >/dev/null 2>&1 && command -v resize2fs >/dev/null 2>&1; } || apt_install e2fsprogs

node bin/berth.js images build shell >/dev/null 2>/tmp/berth-image-build.log || {
  cat /tmp/berth-image-build.log >&2
  exit 1
}
echo "berth: images ready"
