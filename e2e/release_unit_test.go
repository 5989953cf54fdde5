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
