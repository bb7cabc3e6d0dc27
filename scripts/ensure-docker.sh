#!/usr/bin/env bash
# Make sure a Docker engine answers. On a fresh Debian machine as root: install docker.io,
# clear a stale pid file left by a killed dockerd, start dockerd and wait for it.
set -euo pipefail

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

engine_answers && exit 0

if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
  echo "berth: no Docker engine answers. Start one (e.g. 'sudo systemctl start docker') and try again." >&2
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "berth: installing Debian's docker.io ..."
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io >/dev/null
fi

if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
  echo "berth: removing stale /var/run/docker.pid"
  rm -f /var/run/docker.pid
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "berth: starting dockerd (log: /var/log/berth-dockerd.log) ..."
  nohup dockerd >/var/log/berth-dockerd.log 2>&1 &
fi

for _ in $(seq 1 120); do
  if engine_answers; then echo "berth: Docker engine ready"; exit 0; fi
  sleep 0.5
done
echo "berth: dockerd did not answer within 60 s; see /var/log/berth-dockerd.log" >&2
exit 1
