package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeployLinksTheSlotToTheReleaseItChecked: deploy.sh checks <release-dir>/bin/<app>
// from the caller's directory, and the slot's link is read from /srv/<app>: given a
// relative release (deploy.sh shop ./r2, or r2), it linked /srv/shop/slot-<port> -> r2,
// which is /srv/shop/r2, not the release it checked (a start failure at best, some
// other directory's bin/shop at worst). The link's target is the checked release's
// absolute path. systemctl, curl, ss, scafo-node, install and ln are stubs here; ln's
// arguments are recorded.
func TestDeployLinksTheSlotToTheReleaseItChecked(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("deploy.sh needs jq")
	}
	script, err := filepath.Abs("deploy.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stubs := filepath.Join(dir, "stubs")
	work := filepath.Join(dir, "work")
	lnLog := filepath.Join(dir, "ln.log")
	for _, d := range []string{stubs, filepath.Join(work, "r2", "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(work, "r2", "bin", "shop"), "#!/bin/sh\n")
	write(filepath.Join(stubs, "scafo-node"), `#!/bin/sh
case "$1 $2" in
"instances allocate") echo '{"port":24000,"ports":[24000,24001]}' ;;
esac
`)
	write(filepath.Join(stubs, "systemctl"), "#!/bin/sh\n[ \"$1\" = is-active ] && exit 3\nexit 0\n")
	write(filepath.Join(stubs, "curl"), "#!/bin/sh\nexit 0\n")
	write(filepath.Join(stubs, "install"), "#!/bin/sh\nexit 0\n")
	write(filepath.Join(stubs, "ln"), "#!/bin/sh\necho \"$@\" >>"+lnLog+"\n")
	write(filepath.Join(stubs, "sleep"), "#!/bin/sh\nexit 0\n")
	write(filepath.Join(stubs, "ss"), "#!/bin/sh\nexit 0\n")

	for _, rel := range []string{"r2", "./r2", "../work/r2", filepath.Join(work, "r2")} {
		os.Remove(lnLog)
		cmd := exec.Command("sh", script, "shop", rel)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"))
		// ss is a stub that lists no listener: deploy.sh stops after the link, before
		// the move (TestADeployNeverMovesToAnotherReleasesListener, e2e, covers that).
		if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), "no process of shop@24001.service listens") {
			t.Fatalf("deploy.sh shop %s: %v\n%s", rel, err, out)
		}
		b, err := os.ReadFile(lnLog)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		want := filepath.Join(work, "r2")
		real, _ := filepath.EvalSymlinks(want)
		if len(f) != 3 || (f[1] != want && f[1] != real) || f[2] != "/srv/shop/slot-24001" {
			t.Errorf("deploy.sh shop %s: ln %s, want ln -sfn %s /srv/shop/slot-24001", rel, strings.TrimSpace(string(b)), want)
		}
	}
}
