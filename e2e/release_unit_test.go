package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAReleaseNeverRunsAsAnotherServicesUser: app@.service ran a release as
// DynamicUser=yes with User=%p and StateDirectory=%p. systemd takes an existing user
// of that name instead of allocating one, gives units naming one dynamic user the same
// uid, and adopts an existing state directory of that name (systemd.exec(5)). An
// application is a DNS label, and its name was enough: one named scafo ran as the
// node's static user (uid 997 here; the node's SCAFO_ADMIN_TOKEN read from
// /proc/<node>/environ) and its first start moved /var/lib/scafo to
// /var/lib/private/scafo, out of the node's reach; one named traefik shared the
// Traefik unit's dynamic uid. The release's user and state are app-<name> now, and a
// uid systemd did not allocate is refused. One machine under systemd (the cached
// rootfs), no node needed.
func TestAReleaseNeverRunsAsAnotherServicesUser(t *testing.T) {
	requireNspawn(t)
	rootfs := cachedRootfs(t)
	fleet := newFleetNet(t)
	m := bootMachine(t, rootfs, "units", fleet.join(t, "units", "10.83.0.21"))
	m.put(t, filepath.Join(bins.root, "deploy", "app", "app@.service"), "/usr/share/scafo/app/app@.service", 0o644)
	// The node's user and state as the package makes them; a Traefik-like unit with a
	// dynamic user of its unit's name, as deploy/traefik/traefik.service.
	m.sh(t, `useradd --system --no-create-home --shell /usr/sbin/nologin scafo
install -d -m 0700 -o scafo -g scafo /var/lib/scafo
echo token >/var/lib/scafo/admin-token
systemd-run --quiet --unit traefik -p DynamicUser=yes sleep 600
useradd --system --no-create-home --shell /usr/sbin/nologin app-squat
for app in scafo traefik shop squat; do
	install -D -m 0644 /usr/share/scafo/app/app@.service /etc/systemd/system/$app@.service
	install -d /opt/rel/bin /srv/$app
	printf '#!/bin/sh\nexec sleep 600\n' >/opt/rel/bin/$app
	chmod 0755 /opt/rel/bin/$app
	ln -sfn /opt/rel /srv/$app/slot-24000
done
systemctl daemon-reload`)

	// uid is the uid of the running release of unit (Type=simple: the start returns
	// before the exec), or "" with the start's error.
	uid := func(unit string) (int, error) {
		out, err := m.exec(`systemctl start ` + unit + `
for i in $(seq 50); do
	pid=$(systemctl show -p MainPID --value ` + unit + `)
	[ "$(ps -o comm= -p "$pid")" = sleep ] && break
	sleep 0.1
done
ps -o uid= -p "$pid"`)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(out))
	}
	dynamic := func(u int) bool { return u >= 61184 && u <= 65519 }

	traefikUID, err := uid("traefik.service")
	if err != nil || !dynamic(traefikUID) {
		t.Fatalf("the Traefik-like unit: uid %d, %v", traefikUID, err)
	}
	scafoUID := strings.TrimSpace(m.sh(t, "id -u scafo"))
	for _, app := range []string{"scafo", "traefik", "shop"} {
		u, err := uid(app + "@24000.service")
		switch {
		case err != nil:
			t.Errorf("%s@24000: %v", app, err)
		case !dynamic(u):
			t.Errorf("%s@24000 runs as uid %d (the node's user scafo is %s): want a dynamic user of its own", app, u, scafoUID)
		case u == traefikUID:
			t.Errorf("%s@24000 runs as uid %d, the Traefik unit's dynamic user", app, u)
		}
	}
	if got := m.sh(t, `stat -c '%F %U %a' /var/lib/scafo; cat /var/lib/scafo/admin-token`); got != "directory scafo 700\ntoken\n" {
		t.Errorf("the node's state dir after a release named scafo started: %q, want the node's directory, untouched", got)
	}
	if u, err := uid("squat@24000.service"); err == nil {
		t.Errorf("squat@24000 started as uid %d, the static user app-squat: want it refused", u)
	} else if j, _ := m.exec("journalctl -u squat@24000.service --no-pager -o cat"); !strings.Contains(j, "not a dynamic one") {
		t.Errorf("squat@24000 refused without saying why (%v); journal:\n%s", err, j)
	}
}

// TestADeployNeverMovesToAnotherReleasesListener: every release of every application on
// a node shares the address, and a release may bind any free port (app@.service cannot
// stop it on Debian 12: its systemd ignores SocketBindDeny=). A tenant's release that
// took the other slot of another application's pair got that application's next deploy:
// the new release failed to bind, deploy.sh's health check was answered by the
// squatter, and the instance moved to it, the other account's traffic with it. deploy.sh
// now moves nothing unless every listener on the new port is the new slot's unit. The
// real deploy.sh, app@.service and systemd on one machine; scafo-node is a stub that
// records its calls; the releases are the demo echo application.
func TestADeployNeverMovesToAnotherReleasesListener(t *testing.T) {
	requireNspawn(t)
	rootfs := cachedRootfs(t)
	echo := filepath.Join(t.TempDir(), "echo")
	goBuild(t, echo, "./deploy/demo/echo")
	fleet := newFleetNet(t)
	m := bootMachine(t, rootfs, "squat", fleet.join(t, "squat", "10.83.0.24"))
	m.put(t, filepath.Join(bins.root, "deploy", "app", "app@.service"), "/usr/share/scafo/app/app@.service", 0o644)
	m.put(t, filepath.Join(bins.root, "deploy", "app", "deploy.sh"), "/usr/share/scafo/app/deploy.sh", 0o755)
	m.put(t, echo, "/opt/echo", 0o755)
	// shop's pair is 24100 (serving) and 24101; evil's release, on its slot 24000,
	// listens on 24101.
	m.sh(t, `cat >/usr/local/bin/scafo-node <<'STUB'
#!/bin/sh
echo "$*" >>/root/calls
case "$1 $2" in
"instances allocate") echo '{"port":24100,"ports":[24100,24101]}' ;;
esac
STUB
chmod 0755 /usr/local/bin/scafo-node
for app in shop evil; do
	install -D -m 0644 /usr/share/scafo/app/app@.service /etc/systemd/system/$app@.service
	install -d /opt/$app/bin
	printf '#!/bin/sh\nexec /opt/echo --name %s "$@"\n' $app >/opt/$app/bin/$app
	chmod 0755 /opt/$app/bin/$app
done
printf '#!/bin/sh\nexec /opt/echo --name evil --listen 127.0.0.1:24101\n' >/opt/evil/bin/evil
install -d /srv/evil && ln -sfn /opt/evil /srv/evil/slot-24000
systemctl daemon-reload
systemctl start evil@24000.service
curl -fsS --retry 20 --retry-connrefused --retry-delay 1 -o /dev/null http://127.0.0.1:24101/`)

	out, err := m.exec(`DRAIN=0 HEALTH=/ /usr/share/scafo/app/deploy.sh shop /opt/shop 2>&1`)
	calls := m.sh(t, `cat /root/calls; : >/root/calls`)
	if err == nil || strings.Contains(calls, "instances move") {
		t.Errorf("deploy.sh shop with evil listening on 24101: %v\n%s\nscafo-node calls:\n%s\nwant the deploy refused before the move", err, out, calls)
	} else if !strings.Contains(out, "evil@24000.service") {
		t.Errorf("deploy.sh refused without naming the listener's unit:\n%s", out)
	}
	if got, _ := m.exec(`systemctl is-active shop@24101.service`); strings.TrimSpace(got) == "active" {
		t.Errorf("the refused deploy left shop@24101 running")
	}

	// With the port free, the same deploy moves.
	m.sh(t, `systemctl stop evil@24000.service`)
	if out, err := m.exec(`DRAIN=0 HEALTH=/ /usr/share/scafo/app/deploy.sh shop /opt/shop 2>&1`); err != nil {
		t.Fatalf("deploy.sh shop with 24101 free: %v\n%s", err, out)
	}
	if calls := m.sh(t, `cat /root/calls`); !strings.Contains(calls, "instances move shop --port 24101") {
		t.Errorf("deploy.sh shop with 24101 free: scafo-node calls\n%s\nwant the move to 24101", calls)
	}
}
