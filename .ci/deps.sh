#!/usr/bin/env bash
# Installs what make test needs, all at once: MinIO, Pebble, promtool (.bin/), BIND 9 (apt),
# Traefik v3.6.12 and Caddy (user cache), and, as root with debootstrap, the systemd test's
# Debian rootfs (.ci/rootfs.sh). Each is cached and skipped when already there. It also
# fills the Go build cache with what the e2e suite builds of this tree (the node, as e2e's
# TestMain builds it; the static node and deploy/package's builder, as the systemd test
# does), so those downloads and compiles overlap the installers' too.
#
#   .ci/deps.sh    run every job concurrently, each into its own log; print each one's
#                  time; on a failure, print that log's tail and exit 1 after all end.
#                  A job is one command line, split on spaces.
#
# Why concurrently: cold, much of an installer's time is module downloads or debootstrap's
# package fetches (network, not CPU), which overlap another's compile. Measured cold on the
# 2-core machine: one after another, the installers alone took 29 minutes; concurrently, all
# of them with the rootfs and the e2e builds took 26.6 (Traefik, about 12 CPU-minutes, the
# long pole). The Go commands share the module and build caches safely (they lock them).
set -euo pipefail
set -f # a job's command line is split on spaces, never globbed
cd "$(dirname "$0")/.."

logs=$(mktemp -d "${TMPDIR:-/tmp}/scafo-deps.XXXXXX")
declare -A cmds=(
	[minio]="./.ci/minio.sh install"
	[pebble]="./.ci/pebble.sh install"
	[bind]="./.ci/bind.sh install"
	[promtool]="./deploy/prometheus/promtool.sh install"
	[traefik]="./e2e/build-traefik.sh"
	[caddy]="./.ci/caddy.sh"
	[node]="go build -o /dev/null ./node/cmd/scafo-node"
	[static-node]="env CGO_ENABLED=0 go build -trimpath -o /dev/null ./node/cmd/scafo-node"
	[pkgbuild]="go -C deploy/package build -o /dev/null ."
)
# The rootfs needs root and debootstrap; without them the systemd test says why itself.
if [[ "$(id -u)" == 0 ]] && command -v debootstrap >/dev/null; then
	cmds[rootfs]="./.ci/rootfs.sh"
fi

declare -A pids
start=$SECONDS
# Interrupted (a cancelled CI run): end the jobs this script started, by PID, with their
# children (each job is its own process group), rather than leave them building.
stop_jobs() {
	for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
	[[ -z ${ticker:-} ]] || kill "$ticker" 2>/dev/null || true
	rm -rf "$logs"
	exit 130
}
trap stop_jobs INT TERM
set -m # each job in a process group of its own
for name in "${!cmds[@]}"; do
	(
		t0=$SECONDS
		rc=0
		${cmds[$name]} >"$logs/$name.log" 2>&1 || rc=$?
		echo "$((SECONDS - t0))" >"$logs/$name.done"
		exit "$rc"
	) &
	pids[$name]=$!
done
set +m
# Every 5 minutes, the jobs still running: a hung download shows which job it is.
(
	# (a sleep the kill leaves holds no output; the loop ends with this script, even killed)
	while sleep 300 </dev/null >/dev/null 2>&1 && kill -0 $$ 2>/dev/null; do
		left=()
		for name in "${!cmds[@]}"; do [[ -e $logs/$name.done ]] || left+=("$name"); done
		((${#left[@]})) && echo "deps: still running after $((SECONDS - start))s: ${left[*]}"
	done
) &
ticker=$!

failed=()
for name in $(printf '%s\n' "${!cmds[@]}" | sort); do
	rc=0
	wait "${pids[$name]}" || rc=$?
	read -r secs <"$logs/$name.done" || secs=?
	if [[ $rc == 0 ]]; then
		echo "deps: $name ready (${secs}s)"
	else
		echo "deps: $name FAILED (exit $rc, ${secs}s): ${cmds[$name]}; its log's tail:"
		tail -n 30 "$logs/$name.log" | sed 's/^/    /'
		failed+=("$name")
	fi
done
kill "$ticker" 2>/dev/null || true
if ((${#failed[@]})); then
	echo "deps: failed: ${failed[*]} after $((SECONDS - start))s (logs in $logs)"
	exit 1
fi
echo "deps: all ready in $((SECONDS - start))s"
rm -rf "$logs"
