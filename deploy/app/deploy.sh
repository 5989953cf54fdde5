#!/bin/sh
# deploy.sh <app> <release-dir>: a deploy of <app> on this node that drops no request
# (docs/operating.md, "Deploys that lose nothing").
#
#  1. the new release starts on the other port of the application's pair;
#  2. the instance moves there, and the move waits until every live ingress applied it;
#  3. the old release keeps serving for a drain window, then stops (SIGTERM: it finishes
#     the requests in flight).
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
systemctl start "$APP@$NEW.service"
# The new release answers before anything points at it.
curl -fsS --retry 30 --retry-connrefused --retry-delay 1 -o /dev/null "http://$HOST:$NEW$HEALTH"
# ... and it is the one answering: every release on the node shares the address, and
# another application's release may have bound this port first (app@.service). Every
# listener on the port must be in this unit (or be systemd's own, a socket unit), and
# one at least; otherwise nothing moves.
owned=
for pid in $(ss -Htlnp "sport = :$NEW" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
	[ "$pid" = 1 ] && continue
	if ! grep -q "/$APP@$NEW\.service\$" "/proc/$pid/cgroup" 2>/dev/null; then
		echo "deploy.sh: port $NEW is held by pid $pid ($(sed -n 's|^0::||p' "/proc/$pid/cgroup" 2>/dev/null)), not by $APP@$NEW.service: another release listens there; nothing was moved" >&2
		systemctl stop "$APP@$NEW.service"
		exit 1
	fi
	owned=1
done
if [ -z "$owned" ]; then
	echo "deploy.sh: no process of $APP@$NEW.service listens on port $NEW (systemctl status $APP@$NEW.service); nothing was moved" >&2
	systemctl stop "$APP@$NEW.service"
	exit 1
fi

# Fails (non-zero) naming the ingresses behind if not every live one applied it in time:
# the old release then keeps serving, and the deploy stops here for an operator.
scafo-node instances move "$APP" --port "$NEW" --wait "$WAIT"

sleep "$DRAIN"
systemctl stop "$APP@$OLD.service"
echo "deployed $RELEASE: $APP on port $NEW (was $OLD)"
