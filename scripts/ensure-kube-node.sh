#!/usr/bin/env bash
# A real Kubernetes node for the tests, built once from the same Debian source tree as the test API
# server (scripts/ensure-kube.sh) and cached: kubelet (with dockershim), kube-scheduler and
# kube-controller-manager v1.20.2, the pause binary, and Debian's CNI plugins (unpacked, not
# installed). Prints the directory holding them. Nothing is pulled from a registry.
#
# - One `make WHAT="cmd/kubelet cmd/kube-scheduler cmd/kube-controller-manager"`, so the
#   generators run once: 30-50 minutes on 2 shared cores (kubernetes-reality-4.md 4a), the first
#   time only. make test runs it (under nice) before the suites.
# - ensure-kube.sh's two fixes (reflect2 1.0.2, go-openapi's zero-value check), plus three
#   test-only kubelet patches, each for a property of a test host, not of Kubernetes:
#   1. KernelTunableModify -> KernelTunableWarn: the kubelet would rewrite vm.overcommit_memory,
#      kernel.panic and kernel.panic_on_oops on the host.
#   2. oom_score_adj clamped to 0 (sandbox -998, Guaranteed -997): this VM refuses negative values
#      even for root, and every pod failed `runc create`.
#   3. A loopback node IP accepted when BERTH_TEST_KUBELET_LOOPBACK is set: the node lives on
#      127.0.0.1 only, and without an address the API server cannot reach it for exec.
# - The pause binary: gcc -static of the tree's build/pause/linux/pause.c; the rig imports it as an
#   image FROM scratch (test/helpers/real-kube-cluster.ts), so Docker need not run during the build.
# The cache sits beside the API server's (a new directory, so v1.20.2-r2 stays valid). The work
# tree is kept after a failed build, so a second run resumes with Go's build cache. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${BERTH_KUBE_CACHE:-${XDG_DATA_HOME:-$HOME/.local/share}/berth/.berth/cache/kube}
BIN="$CACHE/v1.20.2-node-r1"
if [ -x "$BIN/kubelet" ] && [ -x "$BIN/kube-scheduler" ] && [ -x "$BIN/kube-controller-manager" ] && [ -x "$BIN/pause" ] && [ -x "$BIN/cni/bridge" ]; then
  echo "$BIN"
  exit 0
fi
# --cached: say whether it is built, never build (make test's real tier runs only then).
[ "${1:-}" = --cached ] && { echo "berth: no real-node build in $BIN (scripts/ensure-kube-node.sh builds it, 30-50 minutes)" >&2; exit 3; }

die() { echo "berth: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "building the test Kubernetes node needs root (apt-get); run as root"
command -v rsync >/dev/null 2>&1 || { . ./scripts/apt-install.sh; apt_install rsync; } >&2
command -v dpkg-source >/dev/null 2>&1 || { . ./scripts/apt-install.sh; apt_install dpkg-dev; } >&2
command -v gcc >/dev/null 2>&1 || { . ./scripts/apt-install.sh; apt_install gcc libc6-dev; } >&2

WORK="$CACHE/.node-build"
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/debs" "$WORK/root"

if [ ! -f "$WORK/src/.berth-patched" ]; then
  rm -rf "$WORK/src"
  echo "deb-src http://deb.debian.org/debian bookworm main" >"$WORK/apt/sources.list"
  APT=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  echo "berth: building the test Kubernetes node from Debian's source, once (30-50 minutes) ..." >&2
  apt-get "${APT[@]}" -q update >/dev/null
  (cd "$WORK" && rm -f kubernetes_* && apt-get "${APT[@]}" -q source --download-only kubernetes >/dev/null)
  (cd "$WORK" && dpkg-source -q -x --no-check kubernetes_*.dsc src >/dev/null)
  (cd "$WORK/debs" && rm -f ./*.deb && apt-get -q -o APT::Sandbox::User=root download golang-1.19-go golang-1.19-src golang-github-modern-go-reflect2-dev containernetworking-plugins >/dev/null)
  for deb in "$WORK"/debs/*.deb; do dpkg-deb -x "$deb" "$WORK/root"; done
  S="$WORK/src"

  # ensure-kube.sh's two fixes, word for word (see there for why).
  R2="$WORK/root/usr/share/gocode/src/github.com/modern-go/reflect2"
  [ -f "$R2/reflect2.go" ] || die "golang-github-modern-go-reflect2-dev did not unpack where expected ($R2)"
  rm -rf "$S/vendor/github.com/modern-go/reflect2"
  cp -r "$R2" "$S/vendor/github.com/modern-go/reflect2"
  sed -i 's|^\(\s*github.com/modern-go/reflect2\) v1.0.1|\1 v1.0.2|' "$S/go.mod"
  sed -i 's|^# github.com/modern-go/reflect2 v1.0.1|# github.com/modern-go/reflect2 v1.0.2|' "$S/vendor/modules.txt"
  for TV in "$S/vendor/github.com/go-openapi/validate/type.go" "$S/vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go"; do
    grep -q 'if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {' "$TV" || die "the zero-value check moved ($TV)"
    sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$TV"
  done

  # Test-only patch 1: warn about kernel tunables, never write them.
  CM="$S/pkg/kubelet/cm/container_manager_linux.go"
  grep -q 'b := KernelTunableModify' "$CM" || die "the kernel tunable behaviour moved ($CM)"
  sed -i 's/b := KernelTunableModify/b := KernelTunableWarn/' "$CM"
  # Test-only patch 2: no negative oom_score_adj (this VM refuses it).
  SB="$S/pkg/kubelet/dockershim/docker_sandbox.go"
  grep -q $'^\tdefaultSandboxOOMAdj int = -998$' "$SB" || die "defaultSandboxOOMAdj moved ($SB)"
  sed -i 's/^\tdefaultSandboxOOMAdj int = -998$/\tdefaultSandboxOOMAdj int = 0/' "$SB"
  HL="$S/pkg/kubelet/dockershim/helpers_linux.go"
  grep -q 'createConfig.HostConfig.OomScoreAdj = int(rOpts.OomScoreAdj)$' "$HL" || die "the oom_score_adj assignment moved ($HL)"
  sed -i 's/^\(\s*\)createConfig.HostConfig.OomScoreAdj = int(rOpts.OomScoreAdj)$/&\n\1if createConfig.HostConfig.OomScoreAdj < 0 {\n\1\tcreateConfig.HostConfig.OomScoreAdj = 0\n\1}/' "$HL"
  # Test-only patch 3: a loopback node IP when BERTH_TEST_KUBELET_LOOPBACK is set.
  NS="$S/pkg/kubelet/kubelet_node_status.go"
  grep -q $'^\tif nodeIP.IsLoopback() {$' "$NS" || die "validateNodeIP's loopback check moved ($NS)"
  sed -i $'s/^\tif nodeIP.IsLoopback() {$/\tif nodeIP.IsLoopback() \\&\\& os.Getenv("BERTH_TEST_KUBELET_LOOPBACK") == "" {/' "$NS"
  grep -q $'^\t"os"$' "$NS" || sed -i $'0,/^\t"net"$/s//\t"net"\\n\t"os"/' "$NS"
  grep -q 'BERTH_TEST_KUBELET_LOOPBACK' "$NS" && grep -q $'^\t"os"$' "$NS" || die "the loopback patch did not apply ($NS)"
  touch "$S/.berth-patched"
fi

GOROOT="$WORK/root/usr/lib/go-1.19"
[ -x "$GOROOT/bin/go" ] || die "golang-1.19 did not unpack where expected ($GOROOT)"
(
  cd "$WORK/src"
  # Never a make anywhere else: in berth's tree `make` is `make setup` (npm ci through node_modules).
  [ -f build/root/Makefile ] || die "no Kubernetes tree in $WORK/src"
  export GOROOT PATH="$GOROOT/bin:$PATH" GOPATH="$WORK/gopath" GOCACHE="$WORK/gocache" KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean
  nice -n 10 make -C "$WORK/src" WHAT="cmd/kubelet cmd/kube-scheduler cmd/kube-controller-manager" >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }
)

rm -rf "$BIN.tmp" && mkdir -p "$BIN.tmp/cni"
for b in kubelet kube-scheduler kube-controller-manager; do cp "$WORK/src/_output/bin/$b" "$BIN.tmp/$b"; done
gcc -Os -static -DVERSION=v3.4.1-berth -o "$BIN.tmp/pause" "$WORK/src/build/pause/linux/pause.c"
cp -r "$WORK/root/usr/lib/cni/." "$BIN.tmp/cni/"
"$BIN.tmp/kubelet" --version >&2
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
rm -rf "$WORK"
echo "$BIN"
