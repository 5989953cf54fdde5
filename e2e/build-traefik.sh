#!/usr/bin/env bash
# Builds (once) and prints the path of the Traefik binary the e2e suite drives.
#
# Traefik's go.mod carries replace directives, so `go install ...@version` refuses it.
# We generate a throwaway wrapper module that requires Traefik and copies its replace and
# exclude lines, then build cmd/traefik from it. The binary is cached under the user cache
# dir keyed by version; TRAEFIK_BIN overrides everything. Nothing built here is committed.
set -euo pipefail

VERSION="${TRAEFIK_VERSION:-v3.6.12}"
if [[ -n "${TRAEFIK_BIN:-}" ]]; then
  echo "$TRAEFIK_BIN"
  exit 0
fi
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scafo/traefik/${VERSION}"
BIN="$CACHE/traefik"
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$CACHE"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

export GOFLAGS=-mod=mod
go mod download "github.com/traefik/traefik/v3@${VERSION}" >&2
SRC="$(go env GOMODCACHE)/github.com/traefik/traefik/v3@${VERSION}"

cd "$WORK"
{
  echo "module scafo.local/traefikbuild"
  echo
  grep -E '^go [0-9]' "$SRC/go.mod"
  echo
  echo "require github.com/traefik/traefik/v3 ${VERSION}"
  echo
  # Copy replace/exclude directives (single-line and block forms).
  awk '
    /^(replace|exclude) \(/ {blk=1; print; next}
    blk && /^\)/ {blk=0; print; next}
    blk {print; next}
    /^(replace|exclude) / {print}
  ' "$SRC/go.mod"
} > go.mod
cat > main.go <<'GO'
package main

import _ "github.com/traefik/traefik/v3/cmd/traefik"
GO
# A blank import of a main package is not allowed; tidy against a tools-style file instead.
rm main.go
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/traefik/traefik/v3/cmd/traefik"
GO
echo "building traefik ${VERSION} (cold: ~12 minutes on 2 cores)..." >&2
go mod tidy -e >&2 || true
go get "github.com/traefik/traefik/v3/cmd/traefik@${VERSION}" >&2 || true
go build -trimpath -o "$BIN.tmp" github.com/traefik/traefik/v3/cmd/traefik >&2
mv "$BIN.tmp" "$BIN"
echo "$BIN"
