#!/usr/bin/env bash
# A Node base image for berth's Dockerfile with no registry: berth's node binary (.node/, or the host's), the
# shared libraries it links (at their absolute paths, dynamic loader included), minimal
# /etc/passwd and /etc/group and a 1777 /tmp, imported as berth/node-base:local.
#
#   scripts/make-node-base.sh [--force] [IMAGE]
#   docker build --build-arg BASE=berth/node-base:local -t berth .
#
# Skips the work when the image already exists with this node's version, unless --force.
set -euo pipefail

force=0
image=berth/node-base:local
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h | --help)
      sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*) echo "make-node-base: unknown option $arg" >&2; exit 64 ;;
    *) image="$arg" ;;
  esac
done

# The node berth runs on: the one scripts/ensure-node.sh installed, else the machine's.
repo_node="$(dirname "$0")/../.node/bin/node"
if [ -x "$repo_node" ]; then node_bin="$repo_node"; else node_bin="$(command -v node)" || { echo "make-node-base: no node on PATH" >&2; exit 1; }; fi
node_bin="$(readlink -f "$node_bin")"
node_version="$("$node_bin" --version)"
if [ "$force" = 0 ] && [ "$(docker image inspect -f '{{index .Config.Labels "berth.node"}}' "$image" 2>/dev/null)" = "$node_version" ]; then
  echo "make-node-base: $image already has node $node_version (use --force to rebuild)"
  exit 0
fi
echo "make-node-base: node $("$node_bin" --version) from $node_bin"

root="$(mktemp -d "${TMPDIR:-/tmp}/berth-node-base.XXXXXX")"
trap 'rm -rf "$root"' EXIT

# Copy a file to the same absolute path under the root, following symlinks (the loader in
# /lib64 and usr-merged /lib paths are symlinks on the host; in the image they are files).
copy_abs() {
  mkdir -p "$root$(dirname "$1")"
  cp -L "$1" "$root$1"
}

mkdir -p "$root/usr/local/bin"
cp -L "$node_bin" "$root/usr/local/bin/node"
echo "make-node-base:   /usr/local/bin/node"

# ldd lines: "libx.so => /path/libx.so (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)" and
# "linux-vdso.so.1 (0x...)" (kernel-provided, no file).
libs="$(ldd "$node_bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3; next } $1 ~ /^\// { print $1 }' | sort -u)"
[ -n "$libs" ] || { echo "make-node-base: ldd listed no libraries for $node_bin" >&2; exit 1; }
for lib in $libs; do
  copy_abs "$lib"
  echo "make-node-base:   $lib"
done

mkdir -p "$root/etc" "$root/tmp" "$root/root"
chmod 1777 "$root/tmp"
chmod 700 "$root/root"
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
echo "make-node-base:   /etc/passwd, /etc/group, /tmp (1777)"

echo "make-node-base: importing $image ..."
tar -C "$root" --numeric-owner --owner=0 --group=0 -cf - . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["node"]' \
    --change "LABEL berth.node=$node_version" \
    - "$image" >/dev/null

version="$(docker run --rm --network none "$image" node --version)"
echo "make-node-base: $image ready (node $version in the image)"
