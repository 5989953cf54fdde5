#!/usr/bin/env bash
# Pebble, the real ACME server (Let's Encrypt's test CA) the fleet-certificate tests
# issue against, with pebble-challtestsrv as its DNS, so test names resolve to loopback
# addresses and every HTTP-01 validation really connects to a Traefik.
#
#   .ci/pebble.sh install  go-install pebble and pebble-challtestsrv (both from
#                          github.com/letsencrypt/pebble/v2 at $version) into <repo>/.bin
#                          (git-ignored) unless that exact version is already there.
#                          Cold: about a minute (it compiles).
#
# There is no start: the tests start (and kill) their own Pebble and challtestsrv on
# free loopback ports (node/acme/pebbletest), with a configuration written per test.
set -euo pipefail

version=v2.10.3
module=github.com/letsencrypt/pebble/v2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf 'pebble.sh: %s\n' "$*" >&2; }

installed() { # installed NAME
	local bin="$repo/.bin/$1"
	[[ -x "$bin" ]] && go version -m "$bin" 2>/dev/null | grep -q "$module[[:space:]]*$version"
}

install() {
	local t0=$SECONDS name
	mkdir -p "$repo/.bin"
	for name in pebble pebble-challtestsrv; do
		if installed "$name"; then
			log "$repo/.bin/$name ($version) already installed"
			continue
		fi
		log "installing $module/cmd/$name@$version into $repo/.bin"
		(cd "$repo" && GOBIN="$repo/.bin" GOFLAGS=-buildvcs=false go install "$module/cmd/$name@$version")
	done
	log "done in $((SECONDS - t0))s"
}

case "${1:-}" in
install) install ;;
*)
	echo "usage: $0 install" >&2
	exit 2
	;;
esac
