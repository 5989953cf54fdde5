#!/bin/sh
# deploy.sh <app> <release-dir>: a deploy of <app> on this node that drops no request
# (docs/operating.md, "Deploys that lose nothing").
#
#  1. the new release starts on the other port of the application's pair;
#  2. the instance moves there (the node refuses if the new port does not serve), and the
#     move waits until every live ingress applied it; if not in time, the move is rolled
#     back to the old port and the new release is stopped;
#  3. the old release keeps serving for a drain window, then stops (SIGTERM: it finishes
#     the requests in flight).
#
# The new slot's unit is restarted, not started: a unit an earlier failed deploy left
# active would otherwise keep running its old release. The last line names the process
# that serves: "deployed <release>: <app> on port <new> (was <old>); pid <pid> runs <exe>".
# Exit status: 0 deployed; the move's own status when it failed (scafo-node instances move
# --help: 2 refused, 5 rolled back: the new release is stopped and the old one serves;
# 3 or 4: not known to be live, both releases are left running); 1 otherwise.
#
# <release-dir> is a directory holding bin/<app>, the executable app@.service runs
# (ExecStart=/srv/<app>/slot-<port>/bin/<app>); deploy.sh points /srv/<app>/slot-<port> at
# it, creating /srv/<app> on the first deploy. The unit is <app>@.service, a copy of
# app@.service (/usr/share/scafo/app/app@.service in the scafo-node package) in
# /etc/systemd/system.
#
# Needs: scafo-node (the CLI; SCAFO_URL and SCAFO_TOKEN, an application token with the
# `instance` role, or the admin token from the state dir), jq, curl, ss, systemd units
# <app>@<port>.service (deploy/app/app@.service). Without systemd, replace the three
# systemctl lines by the supervisor's start and stop.
set -eu
APP=$1
RELEASE=$2
DRAIN=${DRAIN:-2}          # seconds; see docs/operating.md for what it covers
HEALTH=${HEALTH:-/healthz} # the application's health path ("" for a TCP check)
WAIT=${WAIT:-30s}
HOST=${HOST:-127.0.0.1}    # the address the release listens on (node.address in a fleet)
ALLOW_NO_INGRESS=${ALLOW_NO_INGRESS:-} # non-empty: a fleet no ingress polls is not a failure
PROC=${PROC:-/proc}         # where the processes are read (deploy_test.go gives a fake one)

inst=$(scafo-node instances allocate "$APP" --json)
OLD=$(echo "$inst" | jq -r .port)
NEW=$(echo "$inst" | jq -r '.port as $p | .ports[] | select(. != $p)')

# An application on a held socket (app@.socket) restarts in place; stopping its old slot
# here would only have the socket start it again.
if systemctl is-active --quiet "$APP@$OLD.socket"; then
	echo "deploy.sh: $APP@$OLD.socket is active: $APP restarts in place (systemctl restart $APP@$OLD.service), see deploy/app/app@.socket" >&2
	exit 1
fi

if [ ! -x "$RELEASE/bin/$APP" ]; then
	echo "deploy.sh: $RELEASE/bin/$APP is not an executable: a release holds bin/$APP" >&2
	exit 1
fi
# The slot's link is read from /srv/<app>: a relative <release-dir> (./r2) would point
# it at /srv/<app>/r2, not at the release just checked.
RELEASE=$(cd -- "$RELEASE" && pwd)
install -d -m 0755 "/srv/$APP"
ln -sfn "$RELEASE" "/srv/$APP/slot-$NEW"
# From here on, a failure stops the new slot (it serves nothing: the instance is not on it).
stop_new=1
trap 'rc=$?; if [ "$rc" != 0 ] && [ -n "$stop_new" ]; then echo "deploy.sh: the deploy failed: stopping $APP@$NEW.service; $APP stays on port $OLD" >&2; systemctl stop "$APP@$NEW.service" || true; fi' EXIT
# restart, not start: on a unit still active (a failed deploy left it running) start does
# nothing, and the release it runs is not the one just linked.
if systemctl is-active --quiet "$APP@$NEW.service"; then
	echo "deploy.sh: $APP@$NEW.service is already active (an earlier deploy left it running): restarting it on $RELEASE" >&2
fi
systemctl restart "$APP@$NEW.service"
# The new release answers before anything points at it.
curl -fsS --retry 30 --retry-connrefused --retry-delay 1 -o /dev/null "http://$HOST:$NEW$HEALTH"
# ... and it is the one answering: every release on the node shares the address, and
# another application's release may have bound this port first (app@.service). Every
# listener on the port must be in this unit (or be systemd's own, a socket unit), and
# one at least; otherwise nothing moves.
owned=
for pid in $(ss -Htlnp "sport = :$NEW" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
	[ "$pid" = 1 ] && continue
	if ! grep -q "/$APP@$NEW\.service\$" "$PROC/$pid/cgroup" 2>/dev/null; then
		echo "deploy.sh: port $NEW is held by pid $pid ($(sed -n 's|^0::||p' "$PROC/$pid/cgroup" 2>/dev/null)), not by $APP@$NEW.service: another release listens there; nothing was moved" >&2
		exit 1
	fi
	owned=1
done
if [ -z "$owned" ]; then
	echo "deploy.sh: no process of $APP@$NEW.service listens on port $NEW (systemctl status $APP@$NEW.service); nothing was moved" >&2
	exit 1
fi

# The node checks the new port serves before it moves; the move waits until every live
# ingress applied it, and moves the instance back to $OLD if not in time (exit 5).
set +e
if [ -n "$ALLOW_NO_INGRESS" ]; then
	scafo-node instances move "$APP" --port "$NEW" --wait "$WAIT" --allowNoIngress
else
	scafo-node instances move "$APP" --port "$NEW" --wait "$WAIT"
fi
moved=$?
set -e
case $moved in
0) stop_new= ;;
2 | 5) exit "$moved" ;; # refused, or rolled back: the instance is on $OLD; the trap stops the new slot
*)
	stop_new=
	echo "deploy.sh: the move of $APP to port $NEW is not known to be live (scafo-node exit $moved): both $APP@$OLD.service and $APP@$NEW.service are left running; scafo-node instances allocate $APP shows the port in use" >&2
	exit "$moved"
	;;
esac

sleep "$DRAIN"
systemctl stop "$APP@$OLD.service"
# Which process serves now, and what it runs.
pid=$(systemctl show --property MainPID --value "$APP@$NEW.service" 2>/dev/null || true)
exe=$(readlink "$PROC/${pid:-0}/exe" 2>/dev/null || echo "$(readlink "/srv/$APP/slot-$NEW" 2>/dev/null)/bin/$APP (slot link)")
echo "deployed $RELEASE: $APP on port $NEW (was $OLD); pid ${pid:-?} runs $exe"
