#!/usr/bin/env bash
# MinIO, the real S3 server the store tests run against.
#
#   .ci/minio.sh install  install MinIO into <repo>/.bin/minio (git-ignored) unless that
#                         exact version is already there. Cold: 4–7 minutes (it compiles).
#   .ci/minio.sh start    run it on 127.0.0.1:<free port> with a temp data dir and a random
#                         root password, wait until it is live, and print export lines:
#                             eval "$(.ci/minio.sh start)"
#                             go test ./node/store/...
#                             .ci/minio.sh stop
#   .ci/minio.sh stop     kill $MINIO_PID and remove $MINIO_DATA_DIR.
#
# `start` is optional: the tests start (and kill) a MinIO of their own from .bin/minio
# when SCAFO_TEST_S3_ENDPOINT is unset.
set -euo pipefail

version=v0.0.0-20260212201848-7aac2a2c5b7c
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$repo/.bin/minio"

log() { printf 'minio.sh: %s\n' "$*" >&2; }
# shellcheck source=lib.sh
. "$repo/.ci/lib.sh"

installed() {
	[[ -x "$bin" ]] && go version -m "$bin" 2>/dev/null | grep -q "github.com/minio/minio[[:space:]]*$version"
}

install() {
	if installed; then
		log "$bin ($version) already installed"
		return
	fi
	log "installing github.com/minio/minio@$version into $repo/.bin (4–7 minutes cold)"
	local t0=$SECONDS
	mkdir -p "$repo/.bin"
	(cd "$repo" && GOBIN="$repo/.bin" GOFLAGS=-buildvcs=false go install "github.com/minio/minio@$version")
	log "installed in $((SECONDS - t0))s"
}

# live PORT: /minio/health/live answers 200.
live() {
	local status
	status=$(
		exec 2>/dev/null
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'GET /minio/health/live HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
		head -n1 <&3
	) || return 1
	[[ $status == *" 200 "* ]]
}

start() {
	[[ -x "$bin" ]] || { log "$bin is missing: run $0 install first"; exit 1; }
	local user=scafo-test password data logf port console pid
	password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	data=$(mktemp -d "${TMPDIR:-/tmp}/scafo-minio.XXXXXX")
	logf="$data.log"
	for _ in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 30000))
		console=$((port + 1))
		port_free "$port" && port_free "$console" || continue
		MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$password MINIO_BROWSER=off MINIO_UPDATE=off \
			"$bin" server --quiet --address "127.0.0.1:$port" --console-address "127.0.0.1:$console" "$data" \
			</dev/null >>"$logf" 2>&1 &
		pid=$!
		local rc=0
		wait_ready "$pid" 600 live "$port" || rc=$? # up to 60 s
		case $rc in
		0)
			log "minio pid $pid live on 127.0.0.1:$port (data $data, log $logf)"
			printf 'export SCAFO_TEST_S3_ENDPOINT=127.0.0.1:%s SCAFO_TEST_S3_ACCESS_KEY=%s SCAFO_TEST_S3_SECRET_KEY=%s MINIO_PID=%s MINIO_DATA_DIR=%s\n' \
				"$port" "$user" "$password" "$pid" "$data"
			return
			;;
		1)
			log "minio exited on port $port; log: $logf"
			tail -n 20 "$logf" >&2 || true
			;;
		*)
			log "minio on port $port not live after 60s; log: $logf"
			kill "$pid" 2>/dev/null || true
			exit 1
			;;
		esac
	done
	log "could not start minio (see $logf)"
	exit 1
}

stop() {
	[[ -n ${MINIO_PID:-} ]] || { log "MINIO_PID is not set"; exit 1; }
	stop_pid "$MINIO_PID"
	if [[ -n ${MINIO_DATA_DIR:-} && $MINIO_DATA_DIR == */scafo-minio.* ]]; then
		rm -rf "$MINIO_DATA_DIR" "$MINIO_DATA_DIR.log"
	fi
}

case "${1:-}" in
install) install ;;
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 install|start|stop" >&2
	exit 2
	;;
esac
