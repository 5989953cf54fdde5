package app

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// deployRig runs deploy.sh shop <release> with stubs for systemctl (its calls logged;
// shop@24001.service active when newActive), scafo-node (allocate answers port 24000 of
// the pair 24000/24001; move exits moveExit), ss (pid 4242 listens on 24001), and a
// fake /proc (PROC) whose pid 4242 is in shop@24001.service and runs the release.
type deployRig struct {
	out     string
	code    int
	systemd []string // systemctl's calls, one per line
}

func runDeploy(t *testing.T, newActive bool, moveExit int) deployRig {
	t.Helper()
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("deploy.sh needs jq")
	}
	script, err := filepath.Abs("deploy.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stubs, rel, proc := filepath.Join(dir, "stubs"), filepath.Join(dir, "r3"), filepath.Join(dir, "proc", "4242")
	for _, d := range []string{stubs, filepath.Join(rel, "bin"), proc} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sdLog := filepath.Join(dir, "systemctl.log")
	active := "3"
	if newActive {
		active = "0"
	}
	write(filepath.Join(rel, "bin", "shop"), "#!/bin/sh\n")
	write(filepath.Join(proc, "cgroup"), "0::/system.slice/system-shop.slice/shop@24001.service\n")
	if err := os.Symlink(filepath.Join(rel, "bin", "shop"), filepath.Join(proc, "exe")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(stubs, "systemctl"), `#!/bin/sh
echo "$@" >>`+sdLog+`
case "$*" in
"is-active --quiet shop@24001.service") exit `+active+` ;;
is-active*) exit 3 ;;
"show --property MainPID --value shop@24001.service") echo 4242 ;;
esac
exit 0
`)
	write(filepath.Join(stubs, "scafo-node"), `#!/bin/sh
case "$1 $2" in
"instances allocate") echo '{"port":24000,"ports":[24000,24001]}' ;;
"instances move") echo "scafo-node: instances move: exit `+strconv.Itoa(moveExit)+`" >&2; exit `+strconv.Itoa(moveExit)+` ;;
esac
`)
	write(filepath.Join(stubs, "ss"), "#!/bin/sh\necho 'LISTEN 0 4096 127.0.0.1:24001 0.0.0.0:* users:((\"shop\",pid=4242,fd=3))'\n")
	for _, name := range []string{"curl", "install", "ln", "sleep"} {
		write(filepath.Join(stubs, name), "#!/bin/sh\nexit 0\n")
	}
	cmd := exec.Command("sh", script, "shop", rel)
	cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "PROC="+filepath.Join(dir, "proc"))
	out, err := cmd.CombinedOutput()
	var r deployRig
	r.out = string(out)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	b, _ := os.ReadFile(sdLog)
	r.systemd = strings.Split(strings.TrimSpace(string(b)), "\n")
	return r
}

// TestDeployRestartsANewSlotAlreadyActive: a failed deploy can leave the new slot's unit
// running its release; `systemctl start` on an active unit does nothing, so the next
// deploy printed "deployed r3" while r1 kept serving. deploy.sh restarts the slot's unit
// (which starts it when inactive), and its last line names the process serving and
// what it runs.
func TestDeployRestartsANewSlotAlreadyActive(t *testing.T) {
	r := runDeploy(t, true, 0)
	if r.code != 0 {
		t.Fatalf("deploy.sh: exit %d\n%s", r.code, r.out)
	}
	if !slices.Contains(r.systemd, "restart shop@24001.service") || slices.Contains(r.systemd, "start shop@24001.service") {
		t.Errorf("the active new slot was not restarted: systemctl %q", r.systemd)
	}
	if !slices.Contains(r.systemd, "stop shop@24000.service") || slices.Contains(r.systemd, "stop shop@24001.service") {
		t.Errorf("a deploy that moved must stop the old slot only: systemctl %q", r.systemd)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	rel := "/r3"
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "deployed ") || !strings.Contains(last, rel+": shop on port 24001 (was 24000); pid 4242 runs ") ||
		!strings.HasSuffix(last, rel+"/bin/shop") {
		t.Errorf("last line %q: want \"deployed <release>: shop on port 24001 (was 24000); pid 4242 runs <release>/bin/shop\"", last)
	}
}

// TestDeployStopsTheNewSlotWhenTheMoveFails: a move the node refused (2) or rolled back
// (5) leaves the instance on the old port, so deploy.sh stops the new slot and exits
// with the move's status (before, set -e exited at once and left the new slot running:
// the next deploy's `systemctl start` then kept that release). A move not known to be
// live (3, 4) may have left the instance on the new port: both slots are left running,
// and the exit status is the move's.
func TestDeployStopsTheNewSlotWhenTheMoveFails(t *testing.T) {
	for _, tc := range []struct {
		moveExit int
		stopsNew bool
	}{{2, true}, {5, true}, {3, false}, {4, false}} {
		r := runDeploy(t, false, tc.moveExit)
		if r.code != tc.moveExit {
			t.Errorf("move exit %d: deploy.sh exit %d, want %d\n%s", tc.moveExit, r.code, tc.moveExit, r.out)
		}
		if got := slices.Contains(r.systemd, "stop shop@24001.service"); got != tc.stopsNew {
			t.Errorf("move exit %d: new slot stopped %v, want %v: systemctl %q\n%s", tc.moveExit, got, tc.stopsNew, r.systemd, r.out)
		}
		if slices.Contains(r.systemd, "stop shop@24000.service") || strings.Contains(r.out, "\ndeployed ") {
			t.Errorf("move exit %d: the old slot was stopped or the deploy said deployed: systemctl %q\n%s", tc.moveExit, r.systemd, r.out)
		}
	}
}
