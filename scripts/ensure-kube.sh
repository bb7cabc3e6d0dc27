#!/usr/bin/env bash
# A real Kubernetes API server for the tests, built once from Debian's sources and cached: no
# registry, no kind or k3s (none is packaged), nothing pulled. Prints the directory holding
# kube-apiserver and etcd.
#
# - kube-apiserver v1.20.2 from Debian's `kubernetes` source package (bookworm ships it as
#   1.20.5+really1.20.2, with Debian's security patches), built with Debian's golang-1.19
#   (unpacked, not installed) by the tree's own `make WHAT=cmd/kube-apiserver` (plain `go build`
#   lacks the generated OpenAPI code). 3.5 minutes here (FACTS measured 13), the first time only.
# - etcd from Debian's etcd-server .deb (unpacked, not installed).
# - kubectl from Debian's kubernetes-client (1.20.2 too), for deploy/'s test.
# Run by make test before the suite; the tests start the server per file (test/helpers/kube-cluster.ts).
# agent-sandbox v0.5.6's Sandbox and SandboxTemplate CRDs are refused by 1.20's validation
# (`default: ""` on fields of newer pod types) until those defaults are stripped (the helper does).
# Measured facts: /work/shared/FACTS.md, "Kubernetes here". The cache is the default berth home's
# (BERTH_KUBE_CACHE overrides it): a fresh clone finds it there. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${BERTH_KUBE_CACHE:-${XDG_DATA_HOME:-$HOME/.local/share}/berth/.berth/cache/kube}
# The build's revision names the cache: a change to what is built here makes a new one everywhere.
BIN="$CACHE/v1.20.2-r2"
if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ] && [ -x "$BIN/kubectl" ]; then
  echo "$BIN"
  exit 0
fi

die() { echo "berth: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "building the test API server needs root (apt-get); run make test as root"
command -v rsync >/dev/null 2>&1 || { . ./scripts/apt-install.sh; apt_install rsync; } >&2
command -v dpkg-source >/dev/null 2>&1 || { . ./scripts/apt-install.sh; apt_install dpkg-dev; } >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/berth-kube-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/debs" "$WORK/root" "$CACHE"

# A private apt view with the source index only: the machine's own apt state is not touched.
echo "deb-src http://deb.debian.org/debian bookworm main" >"$WORK/apt/sources.list"
APT=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
echo "berth: building the test Kubernetes API server from Debian's source, once (a few minutes) ..." >&2
apt-get "${APT[@]}" -q update >/dev/null
(cd "$WORK" && apt-get "${APT[@]}" -q source --download-only kubernetes >/dev/null)
(cd "$WORK" && dpkg-source -q -x --no-check kubernetes_*.dsc src >/dev/null)
(cd "$WORK/debs" && apt-get -q -o APT::Sandbox::User=root download golang-1.19-go golang-1.19-src etcd-server kubernetes-client golang-github-modern-go-reflect2-dev >/dev/null)
for deb in "$WORK"/debs/*.deb; do dpkg-deb -x "$deb" "$WORK/root"; done

# The tree vendors modern-go/reflect2 1.0.1, whose map iteration faults under Go >= 1.18 (measured:
# SIGSEGV in UnsafeMapType.UnsafeIterate while encoding a 422 for a CRD): Debian's 1.0.2 replaces it.
R2="$WORK/root/usr/share/gocode/src/github.com/modern-go/reflect2"
[ -f "$R2/reflect2.go" ] || die "golang-github-modern-go-reflect2-dev did not unpack where expected ($R2)"
rm -rf "$WORK/src/vendor/github.com/modern-go/reflect2"
cp -r "$R2" "$WORK/src/vendor/github.com/modern-go/reflect2"
sed -i 's|^\(\s*github.com/modern-go/reflect2\) v1.0.1|\1 v1.0.2|' "$WORK/src/go.mod"
sed -i 's|^# github.com/modern-go/reflect2 v1.0.1|# github.com/modern-go/reflect2 v1.0.2|' "$WORK/src/vendor/modules.txt"

# go-openapi's type validator (vendored twice) takes a value whose reflect.Value DeepEquals reflect.Zero's
# for JSON null. Built with Go >= 1.19 an empty string does (both point at the runtime's zeroVal), so every
# "" in a custom resource was refused ("must be of type string: null"). Only nil is null.
for TV in "$WORK/src/vendor/github.com/go-openapi/validate/type.go" "$WORK/src/vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go"; do
  grep -q 'if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {' "$TV" || die "the zero-value check moved ($TV)"
  sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$TV"
done

GOROOT="$WORK/root/usr/lib/go-1.19"
[ -x "$GOROOT/bin/go" ] || die "golang-1.19 did not unpack where expected ($GOROOT)"
(
  cd "$WORK/src"
  # The tree is no git checkout: its version is said, not guessed.
  export GOROOT PATH="$GOROOT/bin:$PATH" GOPATH="$WORK/gopath" GOCACHE="$WORK/gocache" KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean
  make WHAT=cmd/kube-apiserver >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }
)

mkdir -p "$BIN.tmp"
cp "$WORK/src/_output/bin/kube-apiserver" "$BIN.tmp/kube-apiserver"
cp "$WORK/root/usr/bin/etcd" "$BIN.tmp/etcd"
cp "$WORK/root/usr/bin/kubectl" "$BIN.tmp/kubectl"
"$BIN.tmp/kube-apiserver" --version >&2
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
echo "$BIN"
