#!/usr/bin/env bash
# Builds (when its inputs changed) and prints the path of the Caddy the e2e suite drives:
# deploy/caddy (Caddy v2.11.9 with scafo's modules, a Go module of its own).
#
#   .ci/caddy.sh          build if needed, print the binary's path
#   .ci/caddy.sh --key    print the cache key only (no build)
#
# The binary is cached under the user cache dir (like Traefik's, e2e/build-traefik.sh),
# keyed by a hash of everything that goes into it: the Go version and target, both
# go.mod/go.sum (deploy/caddy's pins every third-party module, Caddy's included), and the
# contents of every source file of every package of this checkout the build compiles
# (deploy/caddy itself and what it imports from the main module through its replace:
# render/routing, node/storageclient, node/api, ...), as `go list -deps` reports them. The
# key names files by their path inside the checkout, never by where the checkout is, so
# two clones of one tree share one binary. An unchanged tree reuses it; a changed one
# builds a new one. CADDY_BIN overrides everything. SCAFO_ROOT names the checkout
# (default: this script's). Nothing built here is committed.
set -euo pipefail

if [[ -n "${CADDY_BIN:-}" && "${1:-}" != "--key" ]]; then
	echo "$CADDY_BIN"
	exit 0
fi
ROOT="$(cd "${SCAFO_ROOT:-$(dirname "$0")/..}" && pwd -P)"
MOD="$ROOT/deploy/caddy"

key() {
	cd "$MOD"
	{
		go version
		go env GOOS GOARCH GOAMD64 GOARM64 CGO_ENABLED GOEXPERIMENT GOFLAGS
		echo "build: -trimpath"
		for f in "$ROOT/go.mod" "$ROOT/go.sum" "$MOD/go.mod" "$MOD/go.sum"; do
			echo "${f#"$ROOT/"} $(sha256sum <"$f" | cut -d' ' -f1)"
		done
		# Every file of every package of this checkout that the build compiles or embeds.
		go list -deps -f '{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .CgoFiles}}{{$d}}/{{.}}
{{end}}{{range .SFiles}}{{$d}}/{{.}}
{{end}}{{range .CFiles}}{{$d}}/{{.}}
{{end}}{{range .HFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}' . |
			while IFS= read -r f; do
				[[ -n "$f" && "$f" == "$ROOT/"* ]] || continue
				echo "${f#"$ROOT/"} $(sha256sum <"$f" | cut -d' ' -f1)"
			done | LC_ALL=C sort
	} | sha256sum | cut -c1-24
}

KEY="$(key)"
if [[ "${1:-}" == "--key" ]]; then
	echo "$KEY"
	exit 0
fi
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scafo/caddy/$KEY"
BIN="$CACHE/caddy"
if [[ -x "$BIN" ]]; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$CACHE"
echo "building deploy/caddy into $BIN (cold, empty Go build cache: ~10 minutes on 2 busy cores, 5 CPU-minutes)..." >&2
(cd "$MOD" && go build -trimpath -o "$BIN.tmp.$$" .) >&2
mv "$BIN.tmp.$$" "$BIN"
echo "$BIN"
