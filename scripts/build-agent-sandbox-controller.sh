#!/usr/bin/env bash
# The real agent-sandbox controller (kubernetes-sigs/agent-sandbox v0.5.6, cmd/agent-sandbox-controller),
# built from Debian sid's Go packages with no Go module proxy, once, and cached beside the test API
# server (scripts/ensure-kube.sh). Prints the directory holding `agent-sandbox-controller`.
# As measured in /work/shared/kubernetes-reality-4.md (section 4b, appendix): about 35 minutes on 2
# busy cores, 71 sid packages (63 MB). make test does not run it: the fake controller
# (test/fakes/agent-sandbox-controller.ts) stays, checked against this source (docs/kubernetes.md).
#
#   BERTH_AGENT_SANDBOX_MODULES=DIR scripts/build-agent-sandbox-controller.sh [--check | --write-pins]
#
# DIR holds what Debian does not package and CI cannot fetch (no network but Debian and npm), each
# module's tree at its import path, with its go.mod:
#   DIR/sigs.k8s.io/agent-sandbox             the controller's source at tag v0.5.6 (`git archive v0.5.6`)
#   DIR/sigs.k8s.io/controller-runtime        v0.24.1
#   DIR/gomodules.xyz/jsonpatch/v2            v2.x
#   DIR/gopkg.in/evanphx/json-patch.v4        v4.x (its tags have no go.mod; the .go files do)
#   DIR/go.opentelemetry.io/auto/sdk          v1.2.x
# Every other module of v0.5.6's go.mod comes from sid's golang-*-dev packages, at the versions
# pinned in scripts/agent-sandbox-controller.pins (`module package version` per line). sid moves:
# a pinned version no longer there fails the build, naming the package; `--write-pins` resolves
# the modules against today's sid (Sources' Go-Import-Path) and rewrites the pins, to be
# committed after a build with them passed. Needs root (apt-get download through a private view;
# the machine's own apt state is not touched).
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=v0.5.6
# agent-sandbox's tag as the mirror had it (git rev-parse v0.5.6^{commit}), and its go.mod's sha256:
# another tree (another tag, an edited go.mod) is refused.
COMMIT=211b7579cabed9460c1a692eb687084ff4c5879d
GOMOD_SHA256=3cba373986bb6134387444391545a7ec30b2d9d1a0680ad34f8ee5e470ee2cfb
PINS=scripts/agent-sandbox-controller.pins
GO_PACKAGE=golang-1.26-go
UNPACKAGED="sigs.k8s.io/controller-runtime gomodules.xyz/jsonpatch/v2 gopkg.in/evanphx/json-patch.v4 go.opentelemetry.io/auto/sdk"
# Debian's older json-patch/v5 and its patched grpc import these; v0.5.6's go.mod does not list them.
EXTRA_REQUIRES="github.com/pkg/errors v0.9.1
github.com/golang/protobuf v1.5.4"

CACHE=${BERTH_KUBE_CACHE:-${XDG_DATA_HOME:-$HOME/.local/share}/berth/.berth/cache/kube}
# The build's revision names the cache: a change to what is built here makes a new one.
BIN="$CACHE/agent-sandbox-$TAG-r1"
WRITE_PINS=0 CHECK=0
[ "${1:-}" = --write-pins ] && WRITE_PINS=1
# --check: everything but the compile (packages, vendor/, then `go list -deps` resolves every import), minutes not half an hour.
[ "${1:-}" = --check ] && CHECK=1
if [ "$WRITE_PINS" = 0 ] && [ "$CHECK" = 0 ] && [ -x "$BIN/agent-sandbox-controller" ]; then
  echo "$BIN"
  exit 0
fi

die() { echo "berth: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "building agent-sandbox's controller needs root (apt-get download)"
MODS=${BERTH_AGENT_SANDBOX_MODULES:-}
[ "$WRITE_PINS" = 1 ] || [ -n "$MODS" ] || die "BERTH_AGENT_SANDBOX_MODULES is not set: the directory of agent-sandbox's source and the 4 modules Debian lacks (see the top of $0)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/berth-agent-sandbox-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/debs" "$WORK/root" "$CACHE"
# A private apt view of sid: binaries and the Sources index (its Go-Import-Path fields name packages).
printf 'deb http://deb.debian.org/debian sid main\ndeb-src http://deb.debian.org/debian sid main\n' >"$WORK/apt/sources.list"
APT=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$WORK/apt/lists"
  -o "Dir::Cache=$WORK/apt/cache" -o "Dir::State::Status=$WORK/apt/status" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
touch "$WORK/apt/status"
echo "berth: reading Debian sid's package lists (a private view) ..." >&2
apt-get "${APT[@]}" -q update >/dev/null

# The modules v0.5.6's go.mod requires (both blocks), as "path version".
required() {
  awk '/^require \(/{b=1;next} b&&/^\)/{b=0} b&&NF>=2{print $1, $2} /^require [^(]/{print $2, $3}' "$1"
}

if [ "$WRITE_PINS" = 1 ]; then
  GOMOD=${BERTH_AGENT_SANDBOX_GOMOD:-}
  [ -n "$GOMOD" ] || { [ -n "$MODS" ] && GOMOD="$MODS/sigs.k8s.io/agent-sandbox/go.mod"; }
  [ -f "$GOMOD" ] || die "--write-pins reads v0.5.6's go.mod: set BERTH_AGENT_SANDBOX_GOMOD or BERTH_AGENT_SANDBOX_MODULES"
  SOURCES=$(find "$WORK/apt/lists" -name '*_sid_main_source_Sources*' | head -1)
  [ -n "$SOURCES" ] || die "no Sources index for sid came down"
  case "$SOURCES" in *.xz) CAT=(xz -dc) ;; *.gz) CAT=(gzip -dc) ;; *.lz4) CAT=(lz4 -dc) ;; *) CAT=(cat) ;; esac
  # Go-Import-Path (comma-separated) -> the source's -dev binary: "<source>-dev" where there is one
  # (golang-github-golang-protobuf-1-5 also builds a transitional -1-3-dev), else its first -dev.
  "${CAT[@]}" "$SOURCES" | awk '
    /^Package: /{src=$2; bins=""; paths=""}
    /^Binary: /{sub(/^Binary: /,""); bins=$0}
    /^Go-Import-Path: /{sub(/^Go-Import-Path: /,""); paths=$0}
    /^$/{ if (paths!="") { n=split(bins,b,/, */); dev=""; for(i=1;i<=n;i++) if (b[i]==src"-dev" || (dev=="" && b[i] ~ /-dev$/)) dev=b[i]
           m=split(paths,p,/, */); for(i=1;i<=m;i++) if (dev!="") print p[i], dev } paths="" }' | sort -u >"$WORK/import-paths"
  {
    echo "# module debian-package version: scripts/build-agent-sandbox-controller.sh --write-pins, $(date -u +%Y-%m-%d)"
    echo "go $GO_PACKAGE $(apt-cache "${APT[@]}" show --no-all-versions "$GO_PACKAGE" | awk '/^Version:/ && !v {v=$2} END {print v}')"
    echo "go-src golang-1.26-src $(apt-cache "${APT[@]}" show --no-all-versions golang-1.26-src | awk '/^Version:/ && !v {v=$2} END {print v}')"
    { required "$GOMOD"; echo "$EXTRA_REQUIRES"; } | while read -r mod _; do
      [ "$mod" = sigs.k8s.io/agent-sandbox ] && continue
      case " $UNPACKAGED " in *" $mod "*) continue ;; esac
      base=$(echo "$mod" | sed -E 's|/v[0-9]+$||')
      pkg=$(awk -v m="$mod" -v b="$base" '$1==m{print $2; f=1; exit} END{}' "$WORK/import-paths")
      [ -n "$pkg" ] || pkg=$(awk -v b="$base" '$1==b{print $2; exit}' "$WORK/import-paths")
      # A module inside a packaged parent (go.opentelemetry.io/otel/sdk in golang-opentelemetry-otel-dev).
      p=$mod
      while [ -z "$pkg" ] && [ "${p%/*}" != "$p" ]; do
        p=${p%/*}
        pkg=$(awk -v m="$p" '$1==m{print $2; exit}' "$WORK/import-paths")
      done
      [ -n "$pkg" ] || die "no sid package provides $mod (Go-Import-Path): add it to UNPACKAGED and BERTH_AGENT_SANDBOX_MODULES"
      # A major version's own binary where the source builds one (golang-github-cenkalti-backoff-v5-dev for .../backoff/v5).
      case "$mod" in */v[0-9]*)
        alt="${pkg%-dev}-${mod##*/}-dev"
        altver=$( (apt-cache "${APT[@]}" show --no-all-versions "$alt" 2>/dev/null || true) | awk '/^Version:/ && !v {v=$2} END {print v}')
        [ -z "$altver" ] || pkg=$alt ;;
      esac
      ver=$(apt-cache "${APT[@]}" show --no-all-versions "$pkg" 2>/dev/null | awk '/^Version:/ && !v {v=$2} END {print v}')
      [ -n "$ver" ] || die "sid lists $pkg for $mod in Sources but has no binary of it"
      echo "$mod $pkg $ver"
    done
  } >"$WORK/pins"
  mv "$WORK/pins" "$PINS"
  echo "berth: wrote $PINS ($(grep -vc '^#' "$PINS") lines); build with them, then commit it" >&2
  exit 0
fi

[ -f "$PINS" ] || die "$PINS is missing: run $0 --write-pins once"
A="$MODS/sigs.k8s.io/agent-sandbox"
[ -f "$A/go.mod" ] && [ -d "$A/cmd/agent-sandbox-controller" ] || die "$A is not agent-sandbox's source (no go.mod or cmd/agent-sandbox-controller)"
grep -q '^module sigs.k8s.io/agent-sandbox$' "$A/go.mod" || die "$A/go.mod is not sigs.k8s.io/agent-sandbox's"
echo "$GOMOD_SHA256  $A/go.mod" | sha256sum -c --quiet - || die "$A/go.mod is not $TAG's ($COMMIT)"
for mod in $UNPACKAGED; do
  # gopkg.in/evanphx/json-patch.v4's tags carry no go.mod: its .go files are enough there.
  ls "$MODS/$mod"/*.go >/dev/null 2>&1 || die "$MODS/$mod has no Go source: Debian does not package $mod; put its source there"
  [ ! -f "$MODS/$mod/go.mod" ] || grep -q "^module $mod\$" "$MODS/$mod/go.mod" || die "$MODS/$mod/go.mod is not module $mod"
done

# Download exactly the pinned versions: one that sid no longer has stops the build, by name.
grep -v '^#' "$PINS" | awk '{print $2"="$3}' | sort -u >"$WORK/wanted"
echo "berth: downloading $(wc -l <"$WORK/wanted") pinned sid packages ..." >&2
(
  cd "$WORK/debs"
  while read -r want; do
    apt-get "${APT[@]}" -q download "$want" >/dev/null 2>"$WORK/apt.err" || {
      now=$( (apt-cache "${APT[@]}" show --no-all-versions "${want%%=*}" 2>/dev/null || true) | awk '/^Version:/ && !v {v=$2} END {print v}')
      cat "$WORK/apt.err" >&2
      die "sid moved: ${want%%=*} is pinned at ${want#*=} in $PINS, sid has ${now:-none}. Run $0 --write-pins, build, and commit the pins if it passes"
    }
  done <"$WORK/wanted"
)
for deb in "$WORK"/debs/*.deb; do dpkg-deb -x "$deb" "$WORK/root"; done
GOROOT="$WORK/root/usr/lib/go-1.26"
[ -x "$GOROOT/bin/go" ] || die "$GO_PACKAGE did not unpack where expected ($GOROOT)"
GOCODE="$WORK/root/usr/share/gocode/src"

# The source tree, with a vendor/ assembled from the packages and the 4 modules.
B="$WORK/agent-sandbox"
cp -r "$A" "$B"
rm -rf "$B/vendor"
printf 'require (\n%s\n)\n' "$EXTRA_REQUIRES" >>"$B/go.mod"

# Copy module $1's tree from $2 into vendor/$1: no tests, no testdata, no nested module.
vendor_module() {
  local mod=$1 from=$2 to="$B/vendor/$1"
  mkdir -p "$to"
  (cd "$from" && find . -name go.mod -not -path ./go.mod -printf '%h\n') >"$WORK/nested"
  # Every file, not only .go: packages embed data (google.golang.org/protobuf's editions_defaults.binpb).
  (cd "$from" && find . -type f -not -name '*_test.go' -not -path '*/testdata/*' -not -path './.git*' -print) | while read -r f; do
    skip=0
    while read -r n; do case "$f" in "$n"/*) skip=1 ;; esac; done <"$WORK/nested"
    [ "$skip" = 1 ] && continue
    mkdir -p "$to/$(dirname "$f")" && cp "$from/$f" "$to/$f"
  done
}
mkdir -p "$B/vendor"
{ required "$A/go.mod"; echo "$EXTRA_REQUIRES"; } | while read -r mod ver; do
  [ "$mod" = sigs.k8s.io/agent-sandbox ] && continue
  case " $UNPACKAGED " in
    *" $mod "*) from="$MODS/$mod" ;;
    *)
      from="$GOCODE/$mod"
      [ -d "$from" ] || from="$GOCODE/$(echo "$mod" | sed -E 's|/v[0-9]+$||')"
      [ -d "$from" ] || die "module $mod: not in the unpacked packages ($GOCODE); $PINS names its package"
      ;;
  esac
  vendor_module "$mod" "$from"
  godir=$(awk '/^go [0-9]/{print $2; exit}' "$from/go.mod" 2>/dev/null || true)
  echo "# $mod $ver"
  echo "## explicit${godir:+; go $godir}"
  (cd "$B/vendor/$mod" && find . -name '*.go' -printf '%h\n' | sort -u | sed -e "s|^\.$|$mod|" -e "s|^\./|$mod/|")
done >"$B/vendor/modules.txt"

if [ "$CHECK" = 1 ]; then
  (cd "$B" && GOROOT="$GOROOT" PATH="$GOROOT/bin:$PATH" GOPATH="$WORK/gopath" GOCACHE="$WORK/gocache" GOFLAGS=-mod=vendor GOPROXY=off \
    GOTOOLCHAIN=local GOSUMDB=off CGO_ENABLED=0 go list -deps ./cmd/agent-sandbox-controller >"$WORK/deps") ||
    die "vendor/ does not resolve every import (above)"
  echo "berth: vendor/ resolves all $(wc -l <"$WORK/deps") packages of cmd/agent-sandbox-controller; not compiled (--check)" >&2
  exit 0
fi
echo "berth: building agent-sandbox-controller $TAG (about 35 minutes on 2 busy cores) ..." >&2
(
  cd "$B"
  export GOROOT PATH="$GOROOT/bin:$PATH" GOPATH="$WORK/gopath" GOCACHE="$WORK/gocache" GOFLAGS=-mod=vendor GOPROXY=off \
    GOTOOLCHAIN=local GOSUMDB=off CGO_ENABLED=0
  nice -n 10 go build -o "$WORK/agent-sandbox-controller" ./cmd/agent-sandbox-controller >"$WORK/build.log" 2>&1 ||
    { tail -40 "$WORK/build.log" >&2; exit 1; }
)
mkdir -p "$BIN.tmp"
cp "$WORK/agent-sandbox-controller" "$BIN.tmp/agent-sandbox-controller"
cp "$PINS" "$BIN.tmp/pins"
rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
echo "$BIN"
