#!/usr/bin/env bash
# Prints the go.mod of a throwaway module that builds Traefik VERSION's packages: a require
# of Traefik and its own replace and exclude lines (its go.mod needs them to resolve, and
# `go install ...@version` refuses a module that has them). e2e/build-traefik.sh builds
# cmd/traefik with it; render's TestTraefikDecodesTheRender its checker (traefikcheck).
#
#   e2e/traefik-module.sh VERSION [MODULE-PATH]
#
# v3.6.12 builds as published. v3.7.x does not, from the module proxy alone, and gets
# three changes, each printed here as a replace line (docs/traefik.md, "Verified Traefik
# versions"):
#   - github.com/traefik/traefik/dynamic/ext: Traefik's go.mod replaces it by
#     ./pkg/config/dynamic/ext, a nested module the module zip leaves out. Its two files
#     are in e2e/traefik-v3.7/ext, copied unchanged from the Traefik repository at v3.7.9
#     (two empty structs, HTTP and Router; ext.go is one blob, 6fc62b37, from v3.7.0 to
#     the newest commit of the copy of the repository read, which predates v3.7.13's
#     tag; v3.7.13's pkg/config/dynamic embeds exactly those two types).
#   - github.com/abbot/go-http-auth: replaced by Traefik with containous/go-http-auth
#     v0.4.1-0.20260804094822-b975dcaa8c48, which the proxy refuses; the fork's previous
#     pseudo-version (the one v3.6.12 uses) is taken instead: basic and digest auth
#     middlewares then run the fork as of 2020.
#   - github.com/go-acme/lego/v5: six DNS providers' SDKs are refused (akamai edgegrid
#     v13, huaweicloud, nrdcg/oci-go-sdk, sacloud-sdk-go, ucloud, yandex-cloud dns). Lego is
#     replaced by a copy of the same version without those providers (edgedns, huaweicloud,
#     oraclecloud, sakuracloud, ucloud, yandexcloud), made once under the cache directory:
#     a resolver naming one of them fails with lego's "unrecognized DNS provider". No other
#     file of lego changes; newer lego releases need more refused SDKs, not fewer.
set -euo pipefail

VERSION="${1:?usage: traefik-module.sh VERSION [MODULE-PATH]}"
MODULE="${2:-scafo.local/traefikbuild}"
HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scafo/traefik/${VERSION}"

export GOFLAGS=-mod=mod
# Downloads run outside any module: the caller's directory may hold the go.mod being written.
download() { (cd / && GOWORK=off go mod download "$1" >&2); }
download "github.com/traefik/traefik/v3@${VERSION}"
MODCACHE="$(go env GOMODCACHE)"
SRC="$MODCACHE/github.com/traefik/traefik/v3@${VERSION}"

# Copy replace/exclude directives (single-line and block forms).
directives() {
  awk '
    /^(replace|exclude) \(/ {blk=1; print; next}
    blk && /^\)/ {blk=0; print; next}
    blk {print; next}
    /^(replace|exclude) / {print}
  ' "$SRC/go.mod"
}

# legoWithout VERSION DIR PROVIDER...: a copy of lego VERSION in DIR without PROVIDERs.
legoWithout() {
  local v="$1" dir="$2"
  shift 2
  if [[ -f "$dir/.complete" ]]; then
    return
  fi
  download "github.com/go-acme/lego/v5@${v}"
  rm -rf "$dir" "$dir.tmp"
  mkdir -p "$(dirname "$dir")"
  cp -r "$MODCACHE/github.com/go-acme/lego/v5@${v}" "$dir.tmp"
  chmod -R u+w "$dir.tmp"
  local gen="$dir.tmp/providers/dns/zz_gen_dns_providers.go" re
  re="$(IFS='|'; echo "$*")"
  for p in "$@"; do
    rm -rf "${dir:?}.tmp/providers/dns/$p"
  done
  rm -f "$dir.tmp/providers/dns/dns_providers_test.go"
  # Drop each provider's import and its case (the case line and the return after it).
  awk -v re="$re" '
    $0 ~ "\"github.com/go-acme/lego/v5/providers/dns/(" re ")\"$" {next}
    /^\tcase / {if (held != "") print held; held=$0; next}
    held != "" {if ($0 !~ "^\t\treturn (" re ")\\.NewDNSProvider") print held; else {held=""; next}; held=""}
    {print}
  ' "$gen" > "$gen.new"
  mv "$gen.new" "$gen"
  if grep -Eq "return (${re})\\.NewDNSProvider\\(" "$gen"; then
    echo "traefik-module.sh: could not remove $* from lego's provider list" >&2
    exit 1
  fi
  touch "$dir.tmp/.complete"
  mv "$dir.tmp" "$dir"
}

echo "module $MODULE"
echo
grep -E '^go [0-9]' "$SRC/go.mod"
echo
echo "require github.com/traefik/traefik/v3 ${VERSION}"
echo
case "$VERSION" in
v3.7.*)
  lego="$(awk '$1 == "github.com/go-acme/lego/v5" {print $2; exit}' "$SRC/go.mod")"
  legoWithout "$lego" "$CACHE/lego-v5@${lego}" edgedns huaweicloud oraclecloud sakuracloud ucloud yandexcloud
  directives | sed -E \
    -e "s#=> \./pkg/config/dynamic/ext#=> $HERE/traefik-v3.7/ext#" \
    -e 's#(github.com/containous/go-http-auth) v0\.4\.1-0\.20260804094822-b975dcaa8c48#\1 v0.4.1-0.20200324110947-a37a7636d23e#'
  echo "replace github.com/go-acme/lego/v5 => $CACHE/lego-v5@${lego}"
  ;;
*)
  directives
  ;;
esac
