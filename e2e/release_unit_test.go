package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAReleaseNeverRunsAsTheStaticUserOfItsName: app@.service runs a release as
// DynamicUser=yes with User=%p, and systemd uses an existing user of that name
// instead of allocating one (systemd.exec(5)). An application named after a system
// user (scafo, caddy, traefik, www-data, backup, mail, proxy, list, news, root…: all DNS
// labels an application may have) ran as that user: as scafo it shared the node's uid,
// and /proc/<node>/environ or /proc/<node>/root/var/lib/scafo handed it the admin and
// ingress tokens past InaccessiblePaths. The unit now refuses to start a release whose
// user is not one systemd allocated (a uid outside 61184-65519); an application without
// such a user still runs as its dynamic user. One machine under systemd (the cached
// rootfs), no node needed.
func TestAReleaseNeverRunsAsTheStaticUserOfItsName(t *testing.T) {
	requireNspawn(t)
	rootfs := cachedRootfs(t)
	fleet := newFleetNet(t)
	m := bootMachine(t, rootfs, "units", fleet.join(t, "units", "10.83.0.21"))
	m.put(t, filepath.Join(bins.root, "deploy", "app", "app@.service"), "/usr/share/scafo/app/app@.service", 0o644)
	m.sh(t, `useradd --system --no-create-home --shell /usr/sbin/nologin scafo
for app in scafo shop; do
	install -D -m 0644 /usr/share/scafo/app/app@.service /etc/systemd/system/$app@.service
	install -d /opt/rel/bin /srv/$app
	printf '#!/bin/sh\nexec sleep 600\n' >/opt/rel/bin/$app
	chmod 0755 /opt/rel/bin/$app
	ln -sfn /opt/rel /srv/$app/slot-24000
done
systemctl daemon-reload`)

	staticUID := strings.TrimSpace(m.sh(t, "id -u scafo"))
	out, err := m.exec("systemctl start scafo@24000.service")
	if err == nil {
		uid := strings.TrimSpace(m.sh(t, "sleep 1; ps -o uid= -p $(systemctl show -p MainPID --value scafo@24000.service)"))
		t.Errorf("scafo@24000 (an application named scafo) started, running as uid %s (the static user scafo is %s): want it refused", uid, staticUID)
	} else {
		journal, _ := m.exec("journalctl -u scafo@24000.service --no-pager -o cat | tail -n 5")
		if !strings.Contains(journal, "static user") {
			t.Errorf("scafo@24000 refused without saying why (%v %s); journal:\n%s", err, out, journal)
		}
	}

	// Type=simple: the start returns before the release's exec; its uid once it is sleep.
	uidOut := m.sh(t, `systemctl start shop@24000.service
for i in $(seq 50); do
	pid=$(systemctl show -p MainPID --value shop@24000.service)
	[ "$(ps -o comm= -p "$pid")" = sleep ] && break
	sleep 0.1
done
ps -o uid= -p "$pid"`)
	uid, err := strconv.Atoi(strings.TrimSpace(uidOut))
	if err != nil || uid < 61184 || uid > 65519 {
		t.Errorf("shop@24000 runs as uid %d (%v): want a dynamic user (61184-65519)", uid, err)
	}
}
