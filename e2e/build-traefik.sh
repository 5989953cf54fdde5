#!/usr/bin/env bash
# Builds (once) and prints the path of the Traefik binary the e2e suite drives.
#
#   e2e/build-traefik.sh [VERSION]    (default: TRAEFIK_VERSION, else v3.6.12)
#
# Traefik's go.mod carries replace directives, so `go install ...@version` refuses it.
# We generate a throwaway wrapper module (e2e/traefik-module.sh: it requires Traefik and
# copies its replace and exclude lines, and for v3.7.x replaces what the module proxy
# refuses) and build cmd/traefik from it. The binary is cached under the user cache dir
# keyed by version; TRAEFIK_BIN overrides everything. Nothing built here is committed.
set -euo pipefail

VERSION="${1:-${TRAEFIK_VERSION:-v3.6.12}}"
MODULE_SH="$(cd "$(dirname "$0")" && pwd)/traefik-module.sh"
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
cd "$WORK"
"$MODULE_SH" "$VERSION" > go.mod
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
