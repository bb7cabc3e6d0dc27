#!/usr/bin/env bash
# Make gVisor available to Docker as the runtime "runsc", without restarting dockerd.
# As root on Debian: install Debian's runsc if it is missing, add a "runsc" entry to
# /etc/docker/daemon.json (merged with what is there), reload dockerd with SIGHUP, then check
# that a container really runs in gVisor's sentry (its kernel says 4.4.0). Safe to run again:
# a second run changes nothing and only repeats the check.
#
# Why the runtime arguments (see /work/shared/FACTS.md, "Stronger runtimes here"): Debian's
# runsc is a December 2022 snapshot; on this kernel only the ptrace platform works, and it
# refuses every container with "cannot run with network enabled in root network namespace"
# unless it is told --network=none (berth runs containers with network none anyway).
# --host-uds=open: an agent reaches berth only through Unix sockets in its bind-mounted run
# directory; gVisor refuses host sockets without it (measured: the relay connects, reads nothing).
# --oci-seccomp: Docker's seccomp profile applies to the agent inside the sentry too (without it,
# only to the sentry itself; the agent's /proc/self/status shows Seccomp: 0).
set -euo pipefail

# Overrides for a dockerd started with --config-file / --pidfile elsewhere.
DAEMON_JSON=${BERTH_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
DOCKER_PIDFILE=${BERTH_DOCKER_PIDFILE:-/var/run/docker.pid}
RUNTIME_NAME=runsc
RUNTIME_ARGS='["--platform=ptrace","--network=none","--host-uds=open","--oci-seccomp"]'
RELOAD_TIMEOUT_S=10
SMOKE_IMAGE=berth/shell:latest
GVISOR_KERNEL=4.4.0

die() { echo "berth: $*" >&2; exit 1; }

timeout 10 docker info >/dev/null 2>&1 \
  || die "no Docker engine answers; run ./scripts/ensure-docker.sh (or start dockerd) first."

is_root() { [ "$(id -u)" = 0 ]; }

# 1. The runsc binary.
if ! command -v runsc >/dev/null 2>&1; then
  if ! is_root || [ ! -f /etc/debian_version ] || ! command -v apt-get >/dev/null 2>&1; then
    die "runsc (gVisor) is not installed. Run this script as root on Debian (it installs Debian's 'runsc' package), or install gVisor yourself: https://gvisor.dev/docs/user_guide/install/"
  fi
  echo "berth: installing Debian's runsc ..."
  # Quiet unless it fails (apt and debconf chatter such as "delaying package configuration").
  apt_log=$( { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc; } 2>&1 ) \
    || { printf '%s\n' "$apt_log" >&2; die "installing Debian's runsc failed (output above)"; }
  command -v runsc >/dev/null 2>&1 || die "the runsc package installed, but runsc is not on PATH ($PATH)"
fi
RUNSC_PATH=$(readlink -f "$(command -v runsc)")

# The engine's current view of the runtime: "ok" when it has exactly our entry.
engine_has_runtime() {
  local runtimes
  runtimes=$(docker info --format '{{json .Runtimes}}' 2>/dev/null) || return 1
  RUNTIMES="$runtimes" WANT_PATH="$RUNSC_PATH" WANT_ARGS="$RUNTIME_ARGS" NAME="$RUNTIME_NAME" node -e '
    const r = JSON.parse(process.env.RUNTIMES || "null") || {};
    const e = r[process.env.NAME];
    const same = !!e && e.path === process.env.WANT_PATH
      && JSON.stringify(e.runtimeArgs || []) === process.env.WANT_ARGS;
    process.exit(same ? 0 : 1);
  '
}

# 2. The daemon.json entry: merged into whatever is there, written atomically; prints
#    "changed" or "unchanged". Refuses (exit 2) a file that is not a JSON object.
merge_daemon_json() {
  FILE="$DAEMON_JSON" WANT_PATH="$RUNSC_PATH" WANT_ARGS="$RUNTIME_ARGS" NAME="$RUNTIME_NAME" node -e '
    const fs = require("fs"), path = require("path");
    let file = process.env.FILE;
    try { file = fs.realpathSync(file); } catch {} // a symlinked daemon.json: replace its target
    let text = "", mode = 0o644;
    try { text = fs.readFileSync(file, "utf8"); mode = fs.statSync(file).mode & 0o7777; }
    catch (e) { if (e.code !== "ENOENT") throw e; }
    let config;
    try { config = text.trim() ? JSON.parse(text) : {}; }
    catch (e) { console.error(`berth: ${file} is not valid JSON (${e.message}); fix it by hand, nothing was changed`); process.exit(2); }
    if (!config || typeof config !== "object" || Array.isArray(config)) {
      console.error(`berth: ${file} does not hold a JSON object; nothing was changed`); process.exit(2);
    }
    if (config.runtimes !== undefined && (typeof config.runtimes !== "object" || config.runtimes === null || Array.isArray(config.runtimes))) {
      console.error(`berth: "runtimes" in ${file} is not an object; nothing was changed`); process.exit(2);
    }
    const want = { path: process.env.WANT_PATH, runtimeArgs: JSON.parse(process.env.WANT_ARGS) };
    const have = config.runtimes && config.runtimes[process.env.NAME];
    if (JSON.stringify(have) === JSON.stringify(want)) { console.log("unchanged"); process.exit(0); }
    config.runtimes = { ...(config.runtimes || {}), [process.env.NAME]: want };
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const tmp = path.join(path.dirname(file), `.${path.basename(file)}.berth-${process.pid}.tmp`);
    try {
      const fd = fs.openSync(tmp, "wx", mode);
      fs.writeSync(fd, JSON.stringify(config, null, 2) + "\n");
      fs.fsyncSync(fd);
      fs.closeSync(fd);
      fs.renameSync(tmp, file);
    } catch (e) { try { fs.unlinkSync(tmp); } catch {} throw e; }
    console.log("changed");
  '
}

if is_root; then
  command -v node >/dev/null 2>&1 || die "node is needed to edit $DAEMON_JSON"
  change=$(merge_daemon_json) || die "could not update $DAEMON_JSON"
elif engine_has_runtime; then
  change=unchanged
else
  die "the Docker runtime '$RUNTIME_NAME' is not registered; run this script as root (it edits $DAEMON_JSON and reloads dockerd)."
fi

# 3. Reload dockerd's configuration (SIGHUP: no restart, running containers are untouched), only
#    when the file changed or the engine does not list the entry yet.
if [ "$change" = changed ] || ! engine_has_runtime; then
  [ -f "$DOCKER_PIDFILE" ] || die "no $DOCKER_PIDFILE: cannot tell dockerd to reload; restart dockerd yourself to pick up $DAEMON_JSON"
  dockerd_pid=$(cat "$DOCKER_PIDFILE")
  [ "$(cat "/proc/$dockerd_pid/comm" 2>/dev/null)" = dockerd ] \
    || die "$DOCKER_PIDFILE names pid $dockerd_pid, which is not a running dockerd"
  kill -HUP "$dockerd_pid"
  deadline=$((SECONDS + RELOAD_TIMEOUT_S))
  until engine_has_runtime; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      die "dockerd did not list the runtime '$RUNTIME_NAME' ($RUNSC_PATH ${RUNTIME_ARGS}) within ${RELOAD_TIMEOUT_S} s of SIGHUP. Its log says why (a reload error such as a conflicting --add-runtime flag or a key also set on dockerd's command line). Now: $(docker info --format '{{json .Runtimes}}' 2>&1)"
    fi
    sleep 0.2
  done
fi

# 4. Smoke check: a container under runsc sees gVisor's kernel, not the host's.
image=$SMOKE_IMAGE
if ! docker image inspect "$image" >/dev/null 2>&1; then
  image=$(docker images --format '{{.Repository}}:{{.Tag}}' | grep -v '<none>' | head -n 1 || true)
  [ -n "$image" ] || die "no local image to run the smoke check with (build berth/shell: 'berth images build')"
fi
smoke_err=$(mktemp)
trap 'rm -f "$smoke_err"' EXIT
if ! kernel=$(timeout 60 docker run --rm --runtime "$RUNTIME_NAME" --network none "$image" uname -r 2>"$smoke_err"); then
  die "runsc is registered, but a container did not run under it ($image): $(cat "$smoke_err") $kernel"
fi
[ "$kernel" = "$GVISOR_KERNEL" ] \
  || die "a container under runtime '$RUNTIME_NAME' reports kernel '$kernel', not gVisor's $GVISOR_KERNEL: it did not run in gVisor"

echo "berth: gVisor (runsc) registered with Docker as runtime '$RUNTIME_NAME' ($RUNSC_PATH); smoke check passed (kernel $kernel)"
