#!/usr/bin/env bash
# promtool, Prometheus's own rule checker, built once from the Go module proxy; the tests of
# deploy/prometheus/scafo-rules.yml run `promtool check rules` and `promtool test rules` with it.
#
#   deploy/prometheus/promtool.sh install  go-install promtool (github.com/prometheus/prometheus
#                                          at $version) into <repo>/.bin (git-ignored) unless
#                                          that exact version is already there.
#   deploy/prometheus/promtool.sh path     install if needed, then print the binary's path.
#
# Cold (empty build cache, modules downloaded): about 4.6 CPU-minutes (277 CPU-s; 9m40s wall on 2
# cores shared at load 17). Tests through it: about 7 s.
# PROMTOOL_BIN overrides everything.
set -euo pipefail

version=v0.316.0 # Prometheus 3.16
module=github.com/prometheus/prometheus
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin="$repo/.bin/promtool"

log() { printf 'promtool.sh: %s\n' "$*" >&2; }

installed() {
	local info
	[[ -x "$bin" ]] && info=$(go version -m "$bin" 2>/dev/null) &&
		grep -q "$module[[:space:]]*$version" <<<"$info" && grep -q -- "-tags=remove_all_sd" <<<"$info"
}

install() {
	local t0=$SECONDS
	if [[ -n "${PROMTOOL_BIN:-}" ]]; then
		return
	fi
	if installed; then
		log "$bin ($version) already installed"
		return
	fi
	mkdir -p "$repo/.bin"
	log "installing $module/cmd/promtool@$version into $repo/.bin"
	# remove_all_sd leaves out the service-discovery plugins (AWS, Azure, GCE, …): promtool
	# checks and tests rules without them, and builds in far less time.
	(cd "$repo" && GOBIN="$repo/.bin" GOFLAGS=-buildvcs=false go install -trimpath -tags remove_all_sd "$module/cmd/promtool@$version")
	log "done in $((SECONDS - t0))s"
}

case "${1:-}" in
install) install ;;
path)
	install
	echo "${PROMTOOL_BIN:-$bin}"
	;;
*)
	echo "usage: $0 install|path" >&2
	exit 2
	;;
esac
