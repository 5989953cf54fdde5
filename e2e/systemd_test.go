package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/internal/walkthrough"
	"github.com/scafo/ingress/node/store/s3/s3test"
)

// The fleet of docs/install.md: its S3 key (MinIO is started with it) and the two
// package versions the test builds (the second upgrades the first).
const (
	installS3Key    = "scafo-fleet"
	installS3Secret = "scafo-fleet-secret-change-me"
	pkgV1           = "1.0.0+e2e.1"
	pkgV2           = "1.0.0+e2e.2"
)

// TestInstallGuideUnderSystemd installs the packages the way docs/install.md says, on
// three Debian machines booted under a real systemd (systemd-nspawn), runs that page's
// blocks as written (a three-node fleet on MinIO, a Traefik from the installed unit on
// two of them, an application deployed with the installed deploy.sh and app@.service,
// the scafo-caddy package's Caddy on the third routing it),
// then checks what the page promises of the packages under systemd:
//
//   - the node runs as its service user, which reads its configuration and nothing of
//     another service's (the Traefik's rendered configuration and token file), and
//     another service's dynamic user reads nothing of the node's state;
//   - `systemctl restart scafo-node` keeps its tokens and its routes;
//   - two deploys with deploy.sh, a node restart and an upgrade to a newer package
//     (dpkg, under systemd: the postinst restarts the node) lose no request of a load
//     through both Traefiks;
//   - the node's port is never free across restarts (a squatter as nobody never gets it,
//     a client is never refused), and the CLI sends no token to a squatter that holds it
//     while the node and its socket are stopped;
//   - a bad setting fails `systemctl restart`, named in the journal and by `config check`;
//   - an upgrade never prompts; `apt-get remove` keeps the state and the configuration
//     and leaves a Traefik that starts; `purge` deletes the package's configuration and
//     the node's state, never the operator's files nor a directory store holding a fleet;
//   - on a fourth machine, without the package, the install lines of the node unit's own
//     comment (from a checkout) give a running node as the package does.
func TestInstallGuideUnderSystemd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: boots three machines")
	}
	requireBinaries(t)
	requireNspawn(t)
	minio, err := s3test.MinIOBinary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("MinIO: %v", err)
		}
		t.Skipf("MinIO: %v", err)
	}
	start := time.Now()
	rootfs := cachedRootfs(t)
	timed := map[string]time.Duration{"rootfs": time.Since(start)}

	mark := time.Now()
	dist := t.TempDir()
	pkgs := buildPackages(t, dist, pkgV1, caddyBinary(t))
	v1, caddyPkg := pkgs["scafo-node"], pkgs["scafo-caddy"]
	v2 := buildPackages(t, dist, pkgV2, "")["scafo-node"]
	echo := filepath.Join(dist, "echo-app")
	goBuild(t, echo, "./deploy/demo/echo")
	squatter := filepath.Join(dist, "squatter")
	goBuild(t, squatter, "./e2e/squatter")
	timed["packages"] = time.Since(mark)

	mark = time.Now()
	fleet := newFleetNet(t)
	startHubMinIO(t, fleet, minio)
	// docs/install.md's "Turn on HTTPS" asks this CA for solo's names (they all resolve
	// to solo, 10.83.0.5, where Pebble validates HTTP-01 on port 80).
	pebble := startHubPebble(t, fleet, "10.83.0.5")
	addrs := map[string]string{"vps-a": "10.83.0.1", "vps-b": "10.83.0.2", "vps-c": "10.83.0.3"}
	machines := map[string]*machine{}
	for _, name := range []string{"vps-a", "vps-b", "vps-c"} {
		m := bootMachine(t, rootfs, name, fleet.join(t, name, addrs[name]))
		m.put(t, v1, "/root/"+filepath.Base(v1), 0o644)
		if name != "vps-c" { // the two with a Traefik and the application
			m.put(t, bins.traefik, "/usr/local/bin/traefik", 0o755)
			m.put(t, echo, "/root/echo-app", 0o755)
			m.put(t, squatter, "/usr/local/bin/squatter", 0o755) // runnable by nobody: /root is not
		} else { // the one with a Caddy
			m.put(t, caddyPkg, "/root/"+filepath.Base(caddyPkg), 0o644)
		}
		machines[name] = m
	}
	// A fifth, solo, runs docs/install.md's one-machine path: the directory store, a
	// node on 127.0.0.1 and a Traefik beside it.
	solo := bootMachine(t, rootfs, "solo", fleet.join(t, "solo", "10.83.0.5"))
	solo.put(t, v1, "/root/"+filepath.Base(v1), 0o644)
	solo.put(t, bins.traefik, "/usr/local/bin/traefik", 0o755)
	solo.put(t, echo, "/root/echo-app", 0o755)
	solo.put(t, pebble.listenerCA, "/root/pebble-ca.pem", 0o644)
	issuingRoot := filepath.Join(dist, "pebble-root.pem")
	if err := os.WriteFile(issuingRoot, pebble.issuingRoot, 0o644); err != nil {
		t.Fatal(err)
	}
	solo.put(t, issuingRoot, "/root/pebble-root.pem", 0o644)
	machines["solo"] = solo
	// A fourth machine gets the node from a checkout, by the unit file's own comment.
	d := bootMachine(t, rootfs, "vps-d", fleet.join(t, "vps-d", "10.83.0.4"))
	checkout := filepath.Join(dist, pkgV1)
	d.put(t, filepath.Join(checkout, "scafo-node"), "/root/checkout/scafo-node", 0o755)
	for _, f := range []string{"deploy/node/scafo-node.service", "deploy/node/scafo-node.socket", "deploy/node/scafo-node.yaml"} {
		d.put(t, filepath.Join(bins.root, f), "/root/checkout/"+f, 0o644)
	}
	timed["boot"] = time.Since(mark)

	mark = time.Now()
	for _, b := range installWalkthrough(t) {
		for _, name := range b.on {
			m := machines[name]
			if m == nil {
				t.Fatalf("docs/install.md line %d: no machine %q", b.line, name)
			}
			got := m.sh(t, b.code)
			if b.want != "" && !walkthrough.Match(b.want, got) {
				t.Fatalf("docs/install.md line %d on %s printed:\n%s\nwant:\n%s", b.line, name, got, b.want)
			}
		}
	}
	timed["walkthrough"] = time.Since(mark)

	// Turned on HTTPS, solo serves its application from outside over a certificate
	// chained to Pebble's root, for the name asked (not Traefik's default certificate).
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pebble.issuingRoot)
	hc := fleet.client(10 * time.Second)
	hc.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots, ServerName: "echo.apps.example.com"}
	req, _ := http.NewRequest(http.MethodGet, "https://10.83.0.5/hello", nil)
	req.Host = "echo.apps.example.com"
	if resp, err := hc.Do(req); err != nil {
		t.Errorf("HTTPS to solo from the hub, verified against Pebble's root: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "echo /hello" {
			t.Errorf("HTTPS to solo from the hub: %s %q", resp.Status, b)
		}
	}

	// The unit's install lines, as written, on a machine without the package.
	d.sh(t, "cd /root/checkout\n"+unitInstallLines(t)+`
curl -fsS --retry 30 --retry-connrefused --retry-delay 1 -o /dev/null 127.0.0.1:7400/v1/readyz
test "$(ps -o user= -p "$(systemctl show -p MainPID --value scafo-node)")" = scafo
test "$(stat -c '%a %U %G' /etc/scafo/scafo-node.yaml /etc/scafo/scafo-node.env | tr '\n' ' ')" = "640 root scafo 600 root root "
# the node took its admin token from the env file the lines wrote
curl -fsS -o /dev/null -H "Authorization: Bearer $(sed -n 's/^SCAFO_ADMIN_TOKEN=//p' /etc/scafo/scafo-node.env)" 127.0.0.1:7400/v1/status`)
	a, b, c := machines["vps-a"], machines["vps-b"], machines["vps-c"]

	mark = time.Now()
	// The node runs as its user; it reads its configuration, nobody else unprivileged
	// does; it cannot read the Traefik's files, nor can the Traefik's user read its state.
	if got := strings.TrimSpace(a.sh(t, `ps -o user= -p "$(systemctl show -p MainPID --value scafo-node)"`)); got != "scafo" {
		t.Fatalf("scafo-node runs as %q, want scafo", got)
	}
	a.sh(t, `runuser -u scafo -- head -c1 /etc/scafo/scafo-node.yaml >/dev/null`)
	for who, path := range map[string]string{
		"nobody": "/etc/scafo/scafo-node.yaml",
		"scafo":  "/run/traefik/traefik.yml", // the rendered Traefik configuration, with the token
	} {
		if out, err := a.exec(fmt.Sprintf("runuser -u %s -- cat %s", who, path)); err == nil || !strings.Contains(err.Error(), "Permission denied") {
			t.Errorf("user %s reading %s: %v (read %d bytes), want Permission denied", who, path, err, len(out))
		}
	}
	a.sh(t, `test -s /run/traefik/traefik.yml`) // it exists: the refusal above is a refusal
	for _, path := range []string{"/etc/scafo/ingress.env", "/var/lib/scafo/admin-token"} {
		// The Traefik unit's dynamic user, as its unit runs it (same name: same uid).
		script := "systemd-run --quiet --wait --pipe -p DynamicUser=yes -p User=traefik cat " + path
		if out, err := a.exec(script); err == nil || !strings.Contains(err.Error(), "Permission denied") {
			t.Errorf("Traefik's dynamic user reading %s: %v (read %d bytes), want Permission denied", path, err, len(out))
		}
	}

	// The units as installed, drop-ins included, under the real manager keep the exposure
	// docs/security.md gives ("The shipped units"; deploy/app/hardening_test.go checks the
	// files offline).
	a.sh(t, `systemd-analyze security --threshold=14 scafo-node.service >/dev/null
systemd-analyze security --threshold=15 traefik.service >/dev/null
systemd-analyze security --threshold=15 echo@$(systemctl list-units --plain --no-legend 'echo@*.service' | awk 'NR==1 {sub(/^echo@/, "", $1); sub(/\.service$/, "", $1); print $1}').service >/dev/null`)
	c.sh(t, `systemd-analyze security --threshold=15 caddy.service >/dev/null`)

	client := fleet.client(5 * time.Second)
	ingresses := []string{"http://10.83.0.1/", "http://10.83.0.2/"}
	state := func(m *machine) string {
		return m.sh(t, `sha256sum /var/lib/scafo/ingress-token /var/lib/scafo/admin-token; scafo-node routes`)
	}

	// A restart keeps the tokens and the routes (and the Traefiks keep routing). The port
	// is never free meanwhile (issue 46, row 1): a squatter as another user (nobody: a
	// tenant's release may bind any free port), binding every address of the port in a
	// loop through three restarts, never gets it, and a client of the port is never
	// refused (scafo-node.socket queues what arrives while the node restarts).
	load := startHubLoad(t, client, ingresses, "echo.apps.example.com", 4)
	before := state(a)
	pid := a.sh(t, `systemctl show -p MainPID --value scafo-node`)
	a.sh(t, `runuser -u nobody -- /usr/local/bin/squatter squat -for 5m 127.0.0.1:7400 0.0.0.0:7400 '[::]:7400' '[::1]:7400' 10.83.0.1:7400 >/tmp/squat.log 2>&1 &
sq=$!
/usr/local/bin/squatter probe -for 5m http://127.0.0.1:7400/v1/healthz >/tmp/probe.log 2>&1 &
pr=$!
until grep -q started /tmp/squat.log && grep -q started /tmp/probe.log; do sleep 0.1; done
for i in 1 2 3; do systemctl restart scafo-node; done
kill $sq $pr
wait $sq $pr || true
curl -fsS --retry 30 --retry-connrefused --retry-delay 1 -o /dev/null 127.0.0.1:7400/v1/readyz`)
	// What the squatter got: a port ("bound …") or a token; runuser's own words at the
	// kill ("Session terminated, killing shell...") are not the squatter's.
	if got := a.sh(t, `grep -E '^(bound|token|conn) ' /tmp/squat.log || true`); got != "" {
		t.Errorf("a squatter as nobody, during three restarts of scafo-node:\n%s\nwant nothing: the port is never free", got)
	}
	probe := a.sh(t, `cat /tmp/probe.log`)
	if m := regexp.MustCompile(`(?m)^ok (\d+) refused 0 failed 0$`).FindStringSubmatch(probe); m == nil || m[1] == "0" {
		t.Errorf("a client of 127.0.0.1:7400 during three restarts saw:\n%s\nwant answers only, none refused", probe)
	} else {
		t.Logf("127.0.0.1:7400 during three restarts of scafo-node: %s answers, 0 refused, 0 failed", m[1])
	}
	if after := a.sh(t, `systemctl show -p MainPID --value scafo-node`); after == pid {
		t.Fatalf("systemctl restart scafo-node: the same process %s still runs", pid)
	}
	waitSame(t, "vps-a's tokens and routes after a restart", before, func() string { return state(a) })
	load.finish(t, "three node restarts")

	// Two deploys with the installed deploy.sh and echo@.service, under load.
	load = startHubLoad(t, client, ingresses, "echo.apps.example.com", 4)
	for _, rel := range []string{"r2", "r3"} {
		out := a.sh(t, fmt.Sprintf(`install -D -m 0755 echo-app /opt/echo/%[1]s/bin/echo
HOST=10.83.0.1 /usr/share/scafo/app/deploy.sh echo /opt/echo/%[1]s`, rel))
		if !strings.Contains(out, "\ndeployed /opt/echo/"+rel+": echo on port ") {
			t.Fatalf("deploy.sh echo /opt/echo/%s: %q", rel, out)
		}
	}
	load.finish(t, "two deploys on vps-a")

	// An upgrade to a newer package, under load: the postinst restarts the node on the
	// new binary; the state is the same.
	a.put(t, v2, "/root/"+filepath.Base(v2), 0o644)
	load = startHubLoad(t, client, ingresses, "echo.apps.example.com", 4)
	before = state(a)
	pid = a.sh(t, `systemctl show -p MainPID --value scafo-node`)
	// An operator's edit of the conffile survives the upgrade.
	a.sh(t, `echo '# edited by the operator' >>/etc/scafo/scafo-node.yaml`)
	if out := a.sh(t, `apt-get install -y ./`+filepath.Base(v2)+` </dev/null 2>&1`); !strings.Contains(out, "scafo-node: kept /etc/scafo/scafo-node.yaml as it is") {
		t.Errorf("the upgrade over an edited configuration did not say it kept it:\n%s", out)
	}
	a.sh(t, `tail -1 /etc/scafo/scafo-node.yaml | grep -qx '# edited by the operator'
test "$(stat -c '%a %U %G' /etc/scafo/scafo-node.yaml)" = "640 root scafo"
# no dpkg conffile, so no prompt can stop an unattended upgrade; the new default beside
test -z "$(dpkg-query -W -f '${Conffiles}' scafo-node)"
cmp /usr/share/scafo/node/scafo-node.yaml /etc/scafo/scafo-node.yaml.dpkg-dist`)
	if got := a.sh(t, `dpkg-query -W -f '${Version}' scafo-node`); got != pkgV2 {
		t.Fatalf("after the upgrade dpkg says scafo-node %s, want %s", got, pkgV2)
	}
	a.sh(t, `curl -fsS --retry 30 --retry-connrefused --retry-delay 1 -o /dev/null 127.0.0.1:7400/v1/readyz
systemctl is-active scafo-node`)
	if got := a.sh(t, `systemctl show -p MainPID --value scafo-node`); got == pid {
		t.Fatalf("the upgrade did not restart the node (pid %s)", pid)
	}
	if got := a.sh(t, `scafo-node version`); !strings.Contains(got, pkgV2) {
		t.Fatalf("scafo-node version after the upgrade: %q, want %s", got, pkgV2)
	}
	if got := a.sh(t, `tr -d '\n' </proc/"$(systemctl show -p MainPID --value scafo-node)"/cmdline | head -c 64; readlink /proc/"$(systemctl show -p MainPID --value scafo-node)"/exe`); strings.Contains(got, "(deleted)") {
		t.Fatalf("the node still runs the replaced binary: %s", got)
	}
	waitSame(t, "vps-a's tokens and routes after the upgrade", before, func() string { return state(a) })
	load.finish(t, "an upgrade of vps-a's package")
	// The postinst fixes the configuration's group only when it is root's and the file
	// is not group-writable: a group the operator chose stays, a root:root 0660 file is
	// not made writable by the node, and a symlink's target is never touched (hostile
	// review 1, finding 7: chgrp followed the link; review 3, F6: 0660 became root:scafo).
	// The postinst is run as dpkg runs it, without an old version (so no restart).
	a.sh(t, `conf=/etc/scafo/scafo-node.yaml
postinst="/var/lib/dpkg/info/scafo-node.postinst configure"
cp -p $conf /root/conf.keep
chgrp adm $conf
$postinst >/dev/null
test "$(stat -c %G $conf)" = adm
chgrp root $conf
chmod 0660 $conf
$postinst >/root/postinst.out
grep -q "left $conf root:root: it is group-writable" /root/postinst.out
test "$(stat -c '%a %G' $conf)" = "660 root"
chmod 0640 $conf
$postinst >/dev/null
test "$(stat -c %G $conf)" = scafo
install -m 0664 -o root -g adm $conf /srv/scafo-node.yaml
ln -sf /srv/scafo-node.yaml $conf
$postinst >/dev/null
test -L $conf
test "$(stat -c %G /srv/scafo-node.yaml)" = adm
rm -f $conf /srv/scafo-node.yaml
cp -p /root/conf.keep $conf
test "$(stat -c '%a %U %G' $conf)" = "640 root scafo"`)

	// Were the port ever free (the node and its socket stopped), the CLI sends its token
	// to no one but the node: a squatter as nobody holding 127.0.0.1:7400 is refused,
	// named, and receives nothing (issue 46, row 1). vps-a's Traefik is stopped first: its
	// HTTP provider polls 127.0.0.1:7400 every second and checks no owner (it relies on
	// the socket unit: docs/security.md, "The node's port"), so its token would reach the
	// squatter, and this check is the CLI's (a run here failed on Traefik's poll).
	a.sh(t, `systemctl stop traefik scafo-node.socket scafo-node
runuser -u nobody -- /usr/local/bin/squatter squat -for 5m 127.0.0.1:7400 >/tmp/squat.log 2>&1 &
until grep -q '^bound' /tmp/squat.log; do sleep 0.1; done`)
	out, err := a.exec(`scafo-node routes 2>&1`)
	if err == nil || !strings.Contains(out, "uid 65534") || !strings.Contains(out, "no token was sent") {
		t.Errorf("scafo-node routes with a squatter on 127.0.0.1:7400: %v\n%s\nwant a refusal naming uid 65534", err, out)
	}
	a.sh(t, `pkill -u nobody -f '/usr/local/bin/squatter squat' || true
while pgrep -u nobody -f '/usr/local/bin/squatter squat' >/dev/null; do sleep 0.1; done
systemctl start scafo-node traefik
curl -fsS --retry 30 --retry-connrefused --retry-delay 1 -o /dev/null 127.0.0.1:7400/v1/readyz`)
	if got := a.sh(t, `grep '^token' /tmp/squat.log || true`); got != "" {
		t.Errorf("the squatter received a token from the CLI:\n%s", got)
	}

	// A bad setting fails `systemctl restart` (Type=notify), is the journal's last word
	// (exit 78: no restart loop, no start limit to hide it), and `config check` names it
	// and its source; the socket stays held meanwhile; fixed, the node starts (issue 45,
	// item 4).
	b.sh(t, `echo SCAFO_PROBE_INTERVAL=5ms >>/etc/scafo/scafo-node.env`)
	if out, err := b.exec(`systemctl restart scafo-node 2>&1`); err == nil {
		t.Errorf("systemctl restart scafo-node with probe.interval 5ms succeeded:\n%s", out)
	}
	if out, err := b.exec(`set -a; . /etc/scafo/scafo-node.env; scafo-node config check /etc/scafo/scafo-node.yaml 2>&1`); err == nil ||
		!strings.Contains(out, "probe.interval") || !strings.Contains(out, "SCAFO_PROBE_INTERVAL") || !strings.Contains(err.Error(), "78") {
		t.Errorf("scafo-node config check with SCAFO_PROBE_INTERVAL=5ms: %v\n%s\nwant exit 78 naming the setting and its variable", err, out)
	}
	// (Traefik's polls of the held socket start the node again meanwhile, each refused the
	// same way: the journal, not the unit's current state, is read.)
	// grep reads the whole journal (no -q): under pipefail, grep -q's early exit would
	// fail the line with journalctl's SIGPIPE (141) once the journal holds more than a
	// pipe's worth after the match, as it did in one run.
	b.sh(t, `journalctl -u scafo-node --no-pager | grep 'probe.interval 5ms' >/dev/null
journalctl -u scafo-node --no-pager | grep 'status=78' >/dev/null
systemctl is-active --quiet scafo-node.socket
# a client of the port is answered (503, the node refused), not left hanging or refused
test "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 20 127.0.0.1:7400/v1/healthz)" = 503
systemctl is-active --quiet scafo-node.socket
sed -i '/^SCAFO_PROBE_INTERVAL=/d' /etc/scafo/scafo-node.env
systemctl restart scafo-node
curl -fsS --retry 30 --retry-connrefused --retry-delay 1 -o /dev/null 127.0.0.1:7400/v1/readyz`)

	// remove leaves a Traefik that still starts (its unit runs the operator's copies);
	// purge without a directory store deletes the node's state and the package's
	// configuration, and keeps the operator's files in /etc/scafo (issue 45, item 3).
	// The package made /etc/traefik/dynamic; a file the operator puts there is theirs.
	b.sh(t, `test "$(stat -c '%a %U' /etc/traefik/dynamic)" = "755 root"
printf 'http: {}\n' >/etc/traefik/dynamic/mine.yml
apt-get remove -y scafo-node >/dev/null
! systemctl is-active --quiet scafo-node.socket
systemctl restart traefik
systemctl is-active --quiet traefik`)
	out = b.sh(t, `apt-get purge -y scafo-node 2>&1`)
	b.sh(t, `! test -e /var/lib/scafo
! test -e /etc/scafo/scafo-node.yaml
test -f /etc/scafo/scafo-node.env
test -f /etc/scafo/traefik.yml
test -f /etc/scafo/ingress.env
test -f /etc/traefik/dynamic/mine.yml
systemctl restart traefik
systemctl is-active --quiet traefik`)
	if !strings.Contains(out, "kept the files you put in /etc/scafo") {
		t.Errorf("apt-get purge scafo-node did not say what it kept:\n%s", out)
	}
	if !strings.Contains(out, "kept your Traefik routes in /etc/traefik/dynamic: mine.yml") {
		t.Errorf("apt-get purge scafo-node did not say it kept the operator's Traefik routes:\n%s", out)
	}

	// remove keeps the state and the configuration; purge deletes them.
	tokens := c.sh(t, `sha256sum /var/lib/scafo/ingress-token /var/lib/scafo/admin-token`)
	c.sh(t, `apt-get remove -y scafo-node >/dev/null
! systemctl is-active --quiet scafo-node
! test -e /usr/bin/scafo-node
test -f /etc/scafo/scafo-node.yaml
test -f /etc/scafo/scafo-node.env`)
	if got := c.sh(t, `sha256sum /var/lib/scafo/ingress-token /var/lib/scafo/admin-token`); got != tokens {
		t.Fatalf("apt-get remove changed the tokens:\n%s\nwas\n%s", got, tokens)
	}
	// vps-c runs scafo-caddy, whose Caddy reads /etc/scafo/ingress.env and caddy.env:
	// those stay, with every file the operator made. A directory store holding objects
	// (here one, as a fleet on the default store would hold its applications) keeps
	// /var/lib/scafo whole: one purge never deletes a fleet (issue 45, item 3).
	c.sh(t, `install -d -o scafo -m 0700 /var/lib/scafo/store/apps
echo '{"name":"shop"}' >/var/lib/scafo/store/apps/shop.json`)
	out = c.sh(t, `apt-get purge -y scafo-node 2>&1`)
	c.sh(t, `test -f /var/lib/scafo/store/apps/shop.json
test -f /var/lib/scafo/admin-token
test -f /etc/scafo/scafo-node.env
! test -e /etc/scafo/scafo-node.yaml
test -f /etc/scafo/ingress.env
test -f /etc/scafo/caddy.env
systemctl restart caddy
systemctl is-active --quiet caddy
! dpkg -s scafo-node >/dev/null 2>&1`)
	if !strings.Contains(out, "scafo-node: kept /var/lib/scafo: its directory store holds 1 objects") {
		t.Errorf("apt-get purge with a directory store holding a fleet did not say it kept it:\n%s", out)
	}
	timed["checks"] = time.Since(mark)
	t.Logf("timings: rootfs %s, packages (two scafo-node builds, pkgbuild) %s, MinIO and five boots %s, docs/install.md %s, checks %s",
		timed["rootfs"].Round(time.Second), timed["packages"].Round(time.Second), timed["boot"].Round(time.Second),
		timed["walkthrough"].Round(time.Second), timed["checks"].Round(time.Second))
}

// unitInstallLines are the commands deploy/node/scafo-node.service's comment gives for
// an install from a checkout: the "#   " lines after "From a checkout instead".
func unitInstallLines(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bins.root, "deploy", "node", "scafo-node.service"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(l, "From a checkout instead"):
			in = true
		case in && strings.HasPrefix(l, "#   "):
			lines = append(lines, strings.TrimPrefix(l, "#   "))
		case in:
			in = false
		}
	}
	if len(lines) < 4 {
		t.Fatalf("deploy/node/scafo-node.service: found %d install lines after \"From a checkout instead\"", len(lines))
	}
	return strings.Join(lines, "\n")
}

// waitSame waits until get returns want (a restarted node re-publishes within a
// reconcile pass), failing with the difference at the deadline.
func waitSame(t *testing.T, what, want string, get func() string) {
	t.Helper()
	var got string
	if err := poll(30*time.Second, 200*time.Millisecond, func() error {
		if got = get(); got != want {
			return fmt.Errorf("differs")
		}
		return nil
	}); err != nil {
		t.Fatalf("%s:\n%s\nwas:\n%s", what, got, want)
	}
}

// goBuild builds pkg of this module into out.
func goBuild(t *testing.T, out, pkg string, flags ...string) {
	t.Helper()
	args := append(append([]string{"build", "-trimpath"}, flags...), "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = bins.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

var pkgbuildOnce struct {
	sync.Mutex
	path string
}

// buildPackages builds the scafo-node package at version for this machine's
// architecture as `make package` does (static binary, version in its -ldflags,
// deploy/package), and the scafo-caddy package around the Caddy binary caddy unless it
// is "", and returns their paths by name.
func buildPackages(t *testing.T, dist, version, caddy string) map[string]string {
	t.Helper()
	pkgbuildOnce.Lock()
	if pkgbuildOnce.path == "" {
		p := filepath.Join(os.TempDir(), fmt.Sprintf("scafo-e2e-pkgbuild-%d", os.Getpid()))
		cmd := exec.Command("go", "build", "-o", p, ".")
		cmd.Dir = filepath.Join(bins.root, "deploy", "package")
		if b, err := cmd.CombinedOutput(); err != nil {
			pkgbuildOnce.Unlock()
			t.Fatalf("building deploy/package: %v\n%s", err, b)
		}
		pkgbuildOnce.path = p
	}
	pkgbuild := pkgbuildOnce.path
	pkgbuildOnce.Unlock()
	// Removed when the test that built it ends, and forgotten with it: the next test to
	// need it builds it again (a build-cache hit), rather than finding a path to nothing
	// (the second of two package tests in one run did).
	t.Cleanup(func() {
		pkgbuildOnce.Lock()
		defer pkgbuildOnce.Unlock()
		if pkgbuildOnce.path == pkgbuild {
			os.Remove(pkgbuild)
			pkgbuildOnce.path = ""
		}
	})

	dir := filepath.Join(dist, version)
	goBuild(t, filepath.Join(dir, "scafo-node"), "./node/cmd/scafo-node",
		"-ldflags", "-X main.version="+version+" -X main.commit=e2e")
	names := []string{"scafo-node"}
	if caddy != "" {
		b, err := os.ReadFile(caddy)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "caddy"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		names = append(names, "scafo-caddy")
	}
	args := append([]string{"-root", bins.root, "-version", version, "-arch", runtime.GOARCH, "-bin", dir, "-out", dist}, names...)
	cmd := exec.Command(pkgbuild, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pkgbuild %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	paths := map[string]string{}
	for _, p := range strings.Fields(string(out)) {
		paths[strings.SplitN(filepath.Base(p), "_", 2)[0]] = p
	}
	for _, n := range names {
		if paths[n] == "" {
			t.Fatalf("pkgbuild printed no %s package: %q", n, out)
		}
	}
	return paths
}

// startHubMinIO runs MinIO in the fleet's hub namespace, at 10.83.0.9:9000, with the
// key docs/install.md names.
func startHubMinIO(t *testing.T, fleet *fleetNet, bin string) {
	t.Helper()
	p := newProc(t, "minio", "ip", []string{"netns", "exec", fleet.hub, bin, "server", "--quiet",
		"--address", "10.83.0.9:9000", "--console-address", "10.83.0.9:9001", t.TempDir()},
		[]string{"MINIO_ROOT_USER=" + installS3Key, "MINIO_ROOT_PASSWORD=" + installS3Secret, "MINIO_BROWSER=off"})
	p.Grace = 5 * time.Second
	p.MustStart(t)
	c := fleet.client(2 * time.Second)
	if err := p.WaitUntil(60*time.Second, func() error { return proc.HTTPOK(c, "http://10.83.0.9:9000/minio/health/live") }); err != nil {
		t.Fatalf("MinIO in %s: %v", fleet.hub, err)
	}
}

// hubLoad sends GETs for host to every ingress in turn from the hub, counting failures.
type hubLoad struct {
	stop       func()
	ok, failed atomic.Int64
	mu         sync.Mutex
	firsts     []string
}

func startHubLoad(t *testing.T, c *http.Client, ingresses []string, host string, n int) *hubLoad {
	t.Helper()
	l := &hubLoad{}
	l.stop = workers(t, n, func(w, i int) {
		url := ingresses[(w+i)%len(ingresses)] + fmt.Sprintf("load/%d", w+i)
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Host = host
		resp, err := c.Do(req)
		var why string
		if err != nil {
			why = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "echo /load/") {
				why = fmt.Sprintf("%d %q", resp.StatusCode, body)
			}
		}
		if why == "" {
			l.ok.Add(1)
			return
		}
		l.failed.Add(1)
		l.mu.Lock()
		if len(l.firsts) < 10 {
			l.firsts = append(l.firsts, time.Now().Format("15:04:05.000")+" "+url+": "+why)
		}
		l.mu.Unlock()
	})
	// The load is running before the change it measures.
	waitFor(t, "the first answers through the Traefiks", 30*time.Second, func() error {
		if l.ok.Load() < int64(2*n) {
			return fmt.Errorf("%d answered", l.ok.Load())
		}
		return nil
	})
	return l
}

// finish stops the load and fails the test if any request failed.
func (l *hubLoad) finish(t *testing.T, during string) {
	t.Helper()
	l.stop()
	t.Logf("%s: %d requests through two Traefiks, %d failed", during, l.ok.Load()+l.failed.Load(), l.failed.Load())
	if l.failed.Load() > 0 {
		t.Errorf("%s: %d of %d requests failed; the first:\n%s", during, l.failed.Load(),
			l.ok.Load()+l.failed.Load(), strings.Join(l.firsts, "\n"))
	}
}

// installBlock is one sh block of docs/install.md's walkthrough, the machines it runs
// on and the text block after it.
type installBlock struct {
	line int
	on   []string
	code string
	want string
}

var onRE = regexp.MustCompile(`^<!-- on: ([a-z0-9 -]+) -->$`)

// installWalkthrough parses docs/install.md: between "<!-- walkthrough:" and
// "<!-- walkthrough end -->", every sh block is preceded by an "<!-- on: … -->" line
// naming its machines, and may be followed by a text block (its output on each).
func installWalkthrough(t *testing.T) []installBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bins.root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var blocks []installBlock
	var on []string
	in, done := false, false
	for i := 0; i < len(lines) && !done; i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "<!-- walkthrough:"):
			in = true
		case l == "<!-- walkthrough end -->":
			done = true
		case !in:
		case onRE.MatchString(l):
			on = strings.Fields(onRE.FindStringSubmatch(l)[1])
		case l == "```sh" || l == "```text":
			j := i + 1
			for j < len(lines) && lines[j] != "```" {
				j++
			}
			body := strings.Join(lines[i+1:j], "\n")
			if l == "```sh" {
				if on == nil {
					t.Fatalf("docs/install.md line %d: a sh block without an \"<!-- on: … -->\" line before it", i+1)
				}
				blocks = append(blocks, installBlock{line: i + 1, on: on, code: body})
				on = nil
			} else if len(blocks) > 0 && blocks[len(blocks)-1].want == "" {
				blocks[len(blocks)-1].want = body
			}
			i = j
		}
	}
	if !done || len(blocks) < 5 {
		t.Fatalf("docs/install.md: found %d blocks (walkthrough end seen: %v)", len(blocks), done)
	}
	return blocks
}
