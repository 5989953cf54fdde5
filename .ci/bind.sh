#!/usr/bin/env bash
# BIND 9, the real authoritative DNS server the DNS-01 tests update (RFC 2136 with TSIG)
# and Pebble validates against.
#
#   .ci/bind.sh install  apt-get install Debian's bind9 (named) unless named is already
#                        there. Cold: about 30 s (apt-get update first when the package
#                        lists are missing).
#   .ci/bind.sh start    run named on 127.0.0.1:<free port> with a generated TSIG key and
#                        one zone (scafo.test, or $BIND_ZONE) that accepts updates signed
#                        with it, wait until it answers, and print export lines:
#                            eval "$(.ci/bind.sh start)"
#                            dig @127.0.0.1 -p "$SCAFO_TEST_BIND_PORT" "$SCAFO_TEST_BIND_ZONE" SOA
#                            .ci/bind.sh stop
#   .ci/bind.sh stop     kill $BIND_PID and remove $BIND_DIR.
#
# `start` is optional: the tests start (and kill) a named of their own, with a key and
# zones made per test (node/rfc2136/bindtest).
set -euo pipefail

log() { printf 'bind.sh: %s\n' "$*" >&2; }
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

named_bin() { command -v named 2>/dev/null || { [[ -x /usr/sbin/named ]] && echo /usr/sbin/named; }; }

install() {
	if [[ -n $(named_bin) ]]; then
		log "$(named_bin) already installed ($("$(named_bin)" -v))"
		return
	fi
	local t0=$SECONDS
	log "installing bind9 (apt)"
	export DEBIAN_FRONTEND=noninteractive
	# Only the binaries are wanted: the package's service is never started here (the
	# tests run their own named on a free port).
	(apt-get install -y --no-install-recommends bind9 || (apt-get update && apt-get install -y --no-install-recommends bind9)) >/dev/null
	log "installed $("$(named_bin)" -v) in $((SECONDS - t0))s"
}

# loaded DIR PORT: named logged its zones loaded and answers on 127.0.0.1:PORT.
loaded() {
	grep -q 'all zones loaded' "$1/named.log" && ! port_free "$2"
}

start() {
	local bin dir zone port pid secret keyname=scafo-acme
	bin=$(named_bin)
	[[ -n $bin ]] || { log "named is missing: run $0 install first"; exit 1; }
	zone=${BIND_ZONE:-scafo.test}
	dir=$(mktemp -d "${TMPDIR:-/tmp}/scafo-bind.XXXXXX")
	secret=$(head -c 32 /dev/urandom | base64)
	cat >"$dir/$zone.zone" <<ZONE
\$TTL 60
$zone. IN SOA ns.$zone. hostmaster.$zone. 1 60 60 600 1
$zone. IN NS ns.$zone.
ns.$zone. IN A 127.0.0.1
ZONE
	for _ in 1 2 3 4 5; do
		port=$((26000 + RANDOM % 30000))
		port_free "$port" || continue
		cat >"$dir/named.conf" <<CONF
options {
	directory "$dir"; pid-file "$dir/named.pid"; session-keyfile "$dir/session.key";
	managed-keys-directory "$dir";
	listen-on port $port { 127.0.0.1; }; listen-on-v6 { none; };
	recursion no; allow-query { any; }; allow-transfer { none; };
	dnssec-validation no; notify no;
};
controls { };
key "$keyname" { algorithm hmac-sha256; secret "$secret"; };
zone "$zone" { type primary; file "$dir/$zone.zone";
	update-policy { grant $keyname zonesub ANY; }; allow-transfer { key $keyname; }; };
CONF
		chmod 600 "$dir/named.conf"
		"$bin" -g -c "$dir/named.conf" -n 1 </dev/null >>"$dir/named.log" 2>&1 &
		pid=$!
		local rc=0
		wait_ready "$pid" 300 loaded "$dir" "$port" || rc=$? # up to 30 s
		case $rc in
		0)
			log "named pid $pid answering on 127.0.0.1:$port (zone $zone, dir $dir)"
			# The secret goes to a 0600 file, never to the terminal.
			printf '%s\n' "$secret" >"$dir/tsig.secret"
			chmod 600 "$dir/tsig.secret"
			printf 'export SCAFO_TEST_BIND_ADDR=127.0.0.1:%s SCAFO_TEST_BIND_PORT=%s SCAFO_TEST_BIND_ZONE=%s SCAFO_TEST_BIND_KEY=%s SCAFO_TEST_BIND_SECRET_FILE=%s BIND_PID=%s BIND_DIR=%s\n' \
				"$port" "$port" "$zone" "$keyname" "$dir/tsig.secret" "$pid" "$dir"
			return
			;;
		1)
			log "named exited on port $port; log: $dir/named.log"
			tail -n 5 "$dir/named.log" >&2 || true
			;;
		*)
			log "named on port $port did not load its zones in 30s; log: $dir/named.log"
			kill "$pid" 2>/dev/null || true
			exit 1
			;;
		esac
	done
	log "could not start named (see $dir/named.log)"
	exit 1
}

stop() {
	[[ -n ${BIND_PID:-} ]] || { log "BIND_PID is not set"; exit 1; }
	stop_pid "$BIND_PID"
	if [[ -n ${BIND_DIR:-} && $BIND_DIR == */scafo-bind.* ]]; then
		rm -rf "$BIND_DIR"
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
