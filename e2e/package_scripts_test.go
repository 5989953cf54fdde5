package e2e

import (
	"strings"
	"testing"
)

// TestThePackagesNeverAdoptAnAccountOfTheirUsersName: the preinst scripts created the
// service's user only when no user of the name existed, so a machine where scafo
// (or caddy) is an ordinary login account (uid 1000: a person, a deploy account)
// got the node running as that account: /var/lib/scafo with the minted admin and
// ingress tokens is theirs, and so is /etc/scafo/scafo-node.yaml through the group.
// A user or group of the name that is not a system one (a uid or gid of 1000 or
// more) now fails the install, naming it, as adduser --system does; a system user of
// the name (an earlier install's) is kept.
func TestThePackagesNeverAdoptAnAccountOfTheirUsersName(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the packages")
	}
	requireNspawn(t)
	rootfs := cachedRootfs(t)
	dist := t.TempDir()
	pkgs := buildPackages(t, dist, pkgV1, "")
	fleet := newFleetNet(t)
	m := bootMachine(t, rootfs, "pkguser", fleet.join(t, "pkguser", "10.83.0.23"))
	m.put(t, pkgs["scafo-node"], "/root/scafo-node.deb", 0o644)

	m.sh(t, `useradd -m -u 1000 -s /bin/bash scafo`)
	out, err := m.exec(`dpkg -i /root/scafo-node.deb 2>&1`)
	if err == nil {
		owner, _ := m.exec(`stat -c '%U %u' /var/lib/scafo; stat -c '%G' /etc/scafo/scafo-node.yaml`)
		t.Errorf("scafo-node installed over the login account scafo (uid 1000): state dir and configuration group %q; want the install refused", strings.TrimSpace(owner))
	} else if !strings.Contains(out+err.Error(), "not a system") {
		t.Errorf("the install failed without naming the account: %v\n%s", err, out)
	}

	// A system user of the name (an earlier install's, or made by hand) is kept.
	m.sh(t, `dpkg --purge scafo-node >/dev/null 2>&1 || true
userdel -r scafo 2>/dev/null || true
groupdel scafo 2>/dev/null || true
groupadd --system scafo && useradd --system --gid scafo --no-create-home --shell /usr/sbin/nologin scafo
dpkg -i /root/scafo-node.deb >/dev/null
test "$(stat -c '%U %a' /var/lib/scafo)" = "scafo 700"`)
}
