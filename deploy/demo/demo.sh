#!/usr/bin/env bash
# deploy/demo/demo.sh [--once]   (make demo; make demo DEMO_FLAGS=--once)
#
# Routing through a real Traefik, on loopback, from a fresh clone:
#   - builds scafo-node and the demo's echo application, and Traefik v3.6.12 (once,
#     cached, as the tests do: e2e/build-traefik.sh);
#   - starts two nodes, a (127.0.0.2) and b (127.0.0.3), on one directory store (a
#     fleet of two, so an application can have an instance on each and fail over);
#   - starts one Traefik on the shipped static configuration (deploy/traefik/traefik.yml,
#     token rendered by deploy/traefik/render-config.sh; only the listen addresses and
#     the node's address changed, the ACME resolver removed), polling node a with
#     prefer=self;
#   - creates tito-classic (on a) and tito-go (on a, then b) in the account tito, starts
#     an echo server for each instance, claims ti.to for tito-classic;
#   - prints curl lines and what they answered: a platform host, the custom domain, the
#     flip of /paulca/... to tito-go (/paulcarson stays), and failover when tito-go's
#     primary instance is stopped.
# Then everything stays up until Ctrl-C (with --once it stops at the end); either way
# it stops, by PID, every process it started and removes its work directory
# (DEMO_KEEP=1 keeps it, with the logs).
#
# Ports (loopback only): Traefik's web entry point on 127.0.0.1:$DEMO_WEB (18080), its
# websecure one on 127.0.0.1:$((DEMO_WEB+1)); the node APIs on 127.0.0.2 and 127.0.0.3,
# port $DEMO_API (17400); instances from 24000 on each node's address.
set -euo pipefail
cd "$(dirname "$0")/../.."

ONCE=0
[ "${1:-}" = --once ] && ONCE=1
WEB=${DEMO_WEB:-18080}
API=${DEMO_API:-17400}
A=127.0.0.2
B=127.0.0.3
T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

W=$(mktemp -d "${TMPDIR:-/tmp}/scafo-demo.XXXXXX")
PIDS=()
cleanup() {
	trap - EXIT INT TERM
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [ "${DEMO_KEEP:-0}" = 1 ]; then echo "demo: kept $W (logs: $W/*.log)"; else rm -rf "$W"; fi
	echo "demo: stopped ${#PIDS[@]} processes"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n# %s\n' "$*"; }
fail() { echo "demo: $*" >&2; for f in "$W"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }

# start NAME CMD...: runs CMD in the background, logging to $W/NAME.log.
start() {
	local name=$1
	shift
	"$@" >"$W/$name.log" 2>&1 &
	PIDS+=($!)
	eval "PID_${name//[^a-zA-Z0-9]/_}=$!"
}

# waitfor WHAT CMD...: retries CMD for up to 60 s.
waitfor() {
	local what=$1
	shift
	for _ in $(seq 300); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	fail "timed out waiting for $what"
}

echo "demo: building (work dir $W)"
go build -o "$W/scafo-node" ./node/cmd/scafo-node
go build -o "$W/echo" ./deploy/demo/echo
TRAEFIK=$(./e2e/build-traefik.sh)
echo "demo: built in $(elapsed)"

ITOKEN=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
ATOKEN=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export SCAFO_INGRESS_TOKEN=$ITOKEN SCAFO_ADMIN_TOKEN=$ATOKEN # to the nodes, off their command lines
mkdir -p "$W/store"
for n in a b; do
	ip=$A
	[ $n = b ] && ip=$B
	start "node-$n" "$W/scafo-node" --listen="$ip:$API" --stateDir="$W/state-$n" \
		--node.name=$n --node.address=$ip --store.dir.path="$W/store" \
		--reconcile.interval=500ms --traefik.healthCheck.interval=1s --traefik.healthCheck.timeout=500ms
done
for ip in $A $B; do waitfor "node $ip ready" curl -sf "http://$ip:$API/v1/readyz"; done

# The shipped static configuration, on loopback: listen addresses, the node's address,
# the operator's directory in the work dir (empty), no ACME resolver (nothing here may
# reach the internet); then the token, as in production.
mkdir -p "$W/dynamic"
awk -v web="127.0.0.1:$WEB" -v websecure="127.0.0.1:$((WEB + 1))" -v node="$A:$API" -v dyn="$W/dynamic" '
	/^certificatesResolvers:/ { skip = 1; next }
	skip && /^[^ ]/ { skip = 0 }
	skip { next }
	{ sub(/address: ":80"/, "address: \"" web "\"")
	  sub(/address: ":443"/, "address: \"" websecure "\"")
	  sub(/127\.0\.0\.1:7400/, node)
	  sub(/directory: \/etc\/traefik\/dynamic/, "directory: " dyn)
	  print }' deploy/traefik/traefik.yml >"$W/traefik.tmpl.yml"
deploy/traefik/render-config.sh "$W/traefik.tmpl.yml" "$W/traefik.yml"
start traefik "$TRAEFIK" --configFile="$W/traefik.yml"

# api METHOD NODE PATH [BODY]: the node API with the admin token.
api() {
	curl -sf -X "$1" -H "Authorization: Bearer $ATOKEN" "http://$2:$API$3" ${4:+-d "$4"}
}
# instance APP NODE IP: allocates APP's port on NODE, starts its echo server, reports it ready.
instance() {
	local port
	port=$(api POST "$3" "/v1/node/instances/$1" | sed -n 's/.*"port":\([0-9]*\).*/\1/p')
	start "$1@$2" "$W/echo" -name "$1@$2" -listen "$3:$port"
	waitfor "$1@$2 listening" curl -sf "http://$3:$port/healthz"
	api PUT "$3" "/v1/node/instances/$1" '{"ready":true}' >/dev/null
}
api PUT $A /v1/apps/tito-classic '{"account":"tito","placement":["a"]}' >/dev/null
api PUT $A /v1/apps/tito-go '{"account":"tito","placement":["a","b"],"health":{"path":"/healthz"}}' >/dev/null
instance tito-classic a $A
instance tito-go a $A
instance tito-go b $B
api PUT $A /v1/apps/tito-classic/domains/ti.to >/dev/null

# show HOST PATH: the curl line, then what Traefik answered.
show() {
	echo "\$ curl -s --connect-to $1:80:127.0.0.1:$WEB http://$1$2"
	curl -s --max-time 5 --connect-to "$1:80:127.0.0.1:$WEB" "http://$1$2" || echo "(no answer)"
}
# served HOST PATH WANT: Traefik's answer starts with WANT.
served() {
	curl -s --max-time 2 --connect-to "$1:80:127.0.0.1:$WEB" "http://$1$2" | grep -q "^$3 "
}
waitfor "Traefik routing tito-classic" served tito-classic.apps.localhost / tito-classic@a
waitfor "Traefik routing ti.to" served ti.to /paulca/events tito-classic@a
echo "demo: two nodes, three instances and Traefik up in $(elapsed) (node logs, Traefik log: DEMO_KEEP=1)"

say "Every curl goes to Traefik (127.0.0.1:$WEB) with the host name it names (--connect-to)."
say "A platform host: every application is <name>.apps.localhost"
show tito-classic.apps.localhost /
show tito-go.apps.localhost /
say "A custom domain: ti.to is claimed by tito-classic"
show ti.to /paulca/events
show ti.to /paulcarson

say "The flip: tito-classic publishes its path map {\"paulca\": \"tito-go.apps.localhost\"}"
echo "\$ curl -X PUT -H 'Authorization: Bearer \$APP_TOKEN' http://$A:$API/v1/apps/tito-classic/domains/ti.to/paths -d '{\"paths\":{\"paulca\":\"tito-go.apps.localhost\"}}'"
APP_TOKEN=$(api POST $A /v1/tokens '{"account":"tito","app":"tito-classic","roles":["publish"]}' | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
t1=$(date +%s.%N)
curl -sf -X PUT -H "Authorization: Bearer $APP_TOKEN" "http://$A:$API/v1/apps/tito-classic/domains/ti.to/paths" \
	-d '{"paths":{"paulca":"tito-go.apps.localhost"}}'
waitfor "the flip through Traefik" served ti.to /paulca/events tito-go@a
echo "(served by tito-go $(awk -v a="$t1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f s", b - a }') after the PUT; revision $(curl -s -H "Authorization: Bearer $ITOKEN" "http://$A:$API/v1/ingress/routes" | sed -n 's/.*"revision":"\([0-9a-f]*\)".*/\1/p'))"
show ti.to /paulca/events
show ti.to /paulca
show ti.to /paulcarson
show ti.to /

say "Failover: stop tito-go's primary instance (tito-go@a); b's instance takes over"
kill "$PID_tito_go_a"
t2=$(date +%s.%N)
waitfor "failover to tito-go@b" served ti.to /paulca/events tito-go@b
echo "(served by tito-go@b $(awk -v a="$t2" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f s", b - a }') after the stop)"
show ti.to /paulca/events
show tito-go.apps.localhost /

echo
echo "demo: done in $(elapsed)"
if [ $ONCE = 1 ]; then exit 0; fi
echo "demo: still running; try curl -s --connect-to ti.to:80:127.0.0.1:$WEB http://ti.to/paulca/x. Ctrl-C stops everything."
# Wait in the builtin: bash runs a trap at once there, not after a foreground child ends.
sleep infinity &
PIDS+=($!)
wait $! || true
