#!/usr/bin/env bash
# TDLib, Telegram's own client library, for the tests that parse berth's MarkdownV2 with Telegram's
# parser (test/integration/telegram-tdlib.test.ts). Prints the directory whose node_modules holds it.
#
# Installed from the npm registry outside the project's lock: prebuilt-tdlib ships one optional
# package per platform, and npm 11 writes a package-lock.json holding only this machine's, which
# `npm ci` then refuses elsewhere. So: pinned versions, `--no-save --no-package-lock --prefix` into a
# cache beside ensure-kube.sh's (BERTH_TDLIB_CACHE overrides it), the two packages' tarballs checked
# against the sha512 pinned here (npm records them in the cache's hidden lock). tdl's install script
# is not run: its prebuilt addon is loaded (node-gyp-build finds prebuilds/). Safe to run again;
# when cached, it only prints the directory. `--where` prints it without installing (the tests ask).
set -euo pipefail
cd "$(dirname "$0")/.."

TDLIB_VERSION=0.1008065.0 # TDLib 1.8.65
TDLIB_INTEGRITY=sha512-i30D0JSgV6ltHGH1K1NZYyYbZW1UEva5hKZ2GRKxfBfU9Pq8lLFFr84pa1FL3uW9Jw+zOxwWOeK5DbyF+ApRVw==
TDL_VERSION=8.1.0
TDL_INTEGRITY=sha512-idpw60gjJdiJALQg0+6UbxtJTMxVhzZAgCO6QzL81gqBYCkEFjm9zM9HwTTQGeOaAavw4yRHymR68yUUiCoKrA==

CACHE=${BERTH_TDLIB_CACHE:-${XDG_DATA_HOME:-$HOME/.local/share}/berth/.berth/cache}
DIR="$CACHE/tdlib-$TDLIB_VERSION-tdl-$TDL_VERSION"
# Loads tdl and asks TDLib its version: a cache that passes this is whole.
check='const r=require("module").createRequire(process.argv[1]+"/");const tdl=r("tdl");
tdl.configure({tdjson:r("prebuilt-tdlib").getTdjson(),verbosityLevel:0});
const v=tdl.execute({_:"getOption",name:"version"});if(v._!=="optionValueString")throw new Error(JSON.stringify(v));console.log(v.value)'

if [ "${1:-}" = --where ] || [ -f "$DIR/ok" ]; then
  echo "$DIR"
  exit 0
fi

die() { echo "berth: $*" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || die "npm is needed to fetch TDLib for the tests"
echo "berth: fetching TDLib (prebuilt-tdlib $TDLIB_VERSION, tdl $TDL_VERSION) from the npm registry, once ..." >&2
mkdir -p "$CACHE"
TMP=$(mktemp -d "$CACHE/.tdlib.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
npm install --no-save --no-package-lock --no-audit --no-fund --ignore-scripts --loglevel=error --prefix "$TMP" \
  "prebuilt-tdlib@$TDLIB_VERSION" "tdl@$TDL_VERSION" >&2 || die "npm could not install TDLib into $TMP"

integrity() { node -e 'const p=require(process.argv[1]).packages["node_modules/"+process.argv[2]];console.log(p?.integrity??"")' "$TMP/node_modules/.package-lock.json" "$1"; }
[ "$(integrity prebuilt-tdlib)" = "$TDLIB_INTEGRITY" ] || die "prebuilt-tdlib $TDLIB_VERSION's tarball is not the one pinned here"
[ "$(integrity tdl)" = "$TDL_INTEGRITY" ] || die "tdl $TDL_VERSION's tarball is not the one pinned here"
echo "berth: TDLib $(node -e "$check" "$TMP/node_modules") loads" >&2

touch "$TMP/ok"
rm -rf "$DIR" && mv "$TMP" "$DIR"
trap - EXIT
echo "$DIR"
