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
# shellcheck source=scripts/apt-install.sh
. ./scripts/apt-install.sh
apt_install "${missing[@]}"
