#!/usr/bin/env bash
# What only the tests need ("make test", after scripts/setup.sh): Debian's Chromium for the
# browser tests (never a downloaded browser), docker-compose for the compose test, and
# mmdebstrap for the real-agent image's Debian base (no registry). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "berth: installing ${missing[*]} from Debian (for the tests) ..."
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "berth: the tests need ${missing[*]}: please install them (needs root on Debian)" >&2
  exit 1
fi
