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
// relative release (deploy.sh shop ./r3, or r3), it linked /srv/shop/slot-<port> -> r3,
// which is /srv/shop/r3, not the release it checked (a start failure at best, some
// other directory's bin/shop at worst). The link's target is the checked release's
// absolute path (ln's arguments are recorded by its stub).
func TestDeployLinksTheSlotToTheReleaseItChecked(t *testing.T) {
	rig := newDeployRig(t, false, 0)
	want := filepath.Join(rig.dir, "r3")
	real, _ := filepath.EvalSymlinks(want)
	for _, rel := range []string{"r3", "./r3", "../" + filepath.Base(rig.dir) + "/r3", want} {
		r := rig.run(t, rel)
		if r.code != 0 {
			t.Fatalf("deploy.sh shop %s: exit %d\n%s", rel, r.code, r.out)
		}
		if f := strings.Fields(r.ln); len(f) != 3 || (f[1] != want && f[1] != real) || f[2] != "/srv/shop/slot-24001" {
			t.Errorf("deploy.sh shop %s: ln %s, want ln -sfn %s /srv/shop/slot-24001", rel, r.ln, want)
		}
	}
}

// deployRig runs deploy.sh shop <release> from dir, where release r3 holds bin/shop,
// with stubs for systemctl (its calls logged; shop@24001.service active when
// newActive), scafo-node (allocate answers port 24000 of the pair 24000/24001; move
// exits moveExit), ln (its arguments logged), ss (pid 4242 listens on 24001), and a
// fake /proc (PROC) whose pid 4242 is in shop@24001.service and runs r3.
type deployRig struct{ dir, script string }

type deployRun struct {
	out     string
	code    int
	systemd []string // systemctl's calls, one per line
	ln      string   // ln's arguments
}

func newDeployRig(t *testing.T, newActive bool, moveExit int) deployRig {
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
echo "$@" >>`+filepath.Join(dir, "systemctl.log")+`
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
	write(filepath.Join(stubs, "ln"), "#!/bin/sh\necho \"$@\" >>"+filepath.Join(dir, "ln.log")+"\n")
	for _, name := range []string{"curl", "install", "sleep"} {
		write(filepath.Join(stubs, name), "#!/bin/sh\nexit 0\n")
	}
	return deployRig{dir: dir, script: script}
}

func (rig deployRig) run(t *testing.T, release string) deployRun {
	t.Helper()
	for _, log := range []string{"systemctl.log", "ln.log"} {
		os.Remove(filepath.Join(rig.dir, log))
	}
	cmd := exec.Command("sh", rig.script, "shop", release)
	cmd.Dir = rig.dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(rig.dir, "stubs")+":"+os.Getenv("PATH"), "PROC="+filepath.Join(rig.dir, "proc"))
	out, err := cmd.CombinedOutput()
	r := deployRun{out: string(out)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(rig.dir, "systemctl.log"))
	r.systemd = strings.Split(strings.TrimSpace(string(b)), "\n")
	b, _ = os.ReadFile(filepath.Join(rig.dir, "ln.log"))
	r.ln = strings.TrimSpace(string(b))
	return r
}

func runDeploy(t *testing.T, newActive bool, moveExit int) deployRun {
	t.Helper()
	rig := newDeployRig(t, newActive, moveExit)
	return rig.run(t, filepath.Join(rig.dir, "r3"))
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
