#!/usr/bin/env bash
# What only the tests need ("make test", after scripts/setup.sh): Node 22, Debian's Chromium for the
# browser tests (never a downloaded browser), docker-compose for the compose test, and
# mmdebstrap for the real-agent image's Debian base (no registry). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# Node 22 LTS into .node22/ for the unit tier's second run (the suite itself runs on Node 24).
./scripts/ensure-node.sh 22

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
[ ${#missing[@]} -eq 0 ] && exit 0
# shellcheck source=scripts/apt-install.sh
. ./scripts/apt-install.sh
apt_install "${missing[@]}"
