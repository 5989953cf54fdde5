package e2e

// Machines booted under a real systemd, for the packages' tests (systemd_test.go): a
// Debian rootfs built once per machine (.ci/rootfs.sh, cached), an overlay of it per
// machine (the cache stays pristine), booted with `systemd-nspawn --boot` in a network
// namespace of the test's own, entered with `nsenter -t <its init> -a`. The namespaces
// hang off a bridge in a "hub" namespace, where the test's clients and MinIO sit: nothing
// of the host's network is touched and nothing collides with another test's ports.
// Every process the harness starts is ended by its PID (and dies with the test binary),
// every namespace it made is removed at cleanup, and the network namespaces a killed
// run left behind are removed by the next (staleNetns).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireNspawn skips (under CI: fails) when machines cannot be booted here.
func requireNspawn(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (overlay mounts, network namespaces, systemd-nspawn)")
	}
	for _, tool := range []string{"systemd-nspawn", "nsenter", "ip", "mount", "umount", "debootstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("booting machines under systemd needs %s (apt-get install systemd-container debootstrap iproute2; .ci/run installs them)", strings.Join(missing, ", "))
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// cachedRootfs is the Debian rootfs .ci/rootfs.sh built (or builds now, once per machine).
func cachedRootfs(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(bins.root, ".ci", "rootfs.sh"))
	cmd.Stderr = os.Stderr // a cold build prints its progress
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf(".ci/rootfs.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := lines[len(lines)-1]
	if _, err := os.Stat(filepath.Join(dir, "usr", "lib", "systemd", "systemd")); err != nil {
		t.Fatalf(".ci/rootfs.sh gave %q, which holds no systemd: %v", dir, err)
	}
	t.Logf("rootfs %s (%s)", dir, time.Since(start).Round(time.Second))
	return dir
}

var nsSeq atomic.Int64

// fleetNet is a bridge in a namespace of its own (the hub, at 10.83.0.9/24) that
// machines' namespaces join.
type fleetNet struct {
	hub    string // namespace name
	prefix string
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func newFleetNet(t *testing.T) *fleetNet {
	t.Helper()
	staleNetns()
	prefix := fmt.Sprintf("scafo-e2e-%d-%d", os.Getpid(), nsSeq.Add(1))
	n := &fleetNet{hub: prefix + "-hub", prefix: prefix}
	mustRun(t, "ip", "netns", "add", n.hub)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.hub).Run() })
	mustRun(t, "ip", "-n", n.hub, "link", "set", "lo", "up")
	mustRun(t, "ip", "-n", n.hub, "link", "add", "br0", "type", "bridge")
	mustRun(t, "ip", "-n", n.hub, "addr", "add", "10.83.0.9/24", "dev", "br0")
	mustRun(t, "ip", "-n", n.hub, "link", "set", "br0", "up")
	return n
}

// staleNetns removes the network namespaces of earlier runs of this suite whose test
// binary is gone (a run killed before its cleanup): named scafo-e2e-<its pid>-….
func staleNetns() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], "scafo-e2e-") {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(f[0], "scafo-e2e-"), "-", 2)[0])
		if err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
}

// join makes a namespace for a machine with addr on the bridge and returns its path.
func (n *fleetNet) join(t *testing.T, name, addr string) string {
	t.Helper()
	ns := n.prefix + "-" + name
	mustRun(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	mustRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
	port := "p-" + name
	mustRun(t, "ip", "-n", n.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	mustRun(t, "ip", "-n", n.hub, "link", "set", port, "master", "br0", "up")
	mustRun(t, "ip", "-n", ns, "addr", "add", addr+"/24", "dev", "eth0")
	mustRun(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	return "/run/netns/" + ns
}

// client is an HTTP client whose connections are made in the hub namespace.
func (n *fleetNet) client(timeout time.Duration) *http.Client {
	nsPath := "/run/netns/" + n.hub
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			return nil, err
		}
		defer self.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			return nil, err
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			return nil, fmt.Errorf("entering %s: %w", nsPath, err)
		}
		// The socket is made in the hub's namespace and stays there; the thread goes back.
		defer func() {
			if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
				panic(fmt.Sprintf("leaving %s: %v", nsPath, err)) // a thread in the wrong namespace must not be reused
			}
		}()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 64}}
}

// machine is one booted container.
type machine struct {
	name string
	root string // its root directory, as this process sees it (/proc/<init>/root)
	init int    // its systemd, as this process sees it
}

// bootMachine boots an overlay of rootfs as hostname name in the network namespace
// netns, and returns once its systemd says running (or degraded).
//
// systemd-nspawn runs as PID 1 of a PID and mount namespace of its own (unshare
// --kill-child, itself killed with the test binary): when the test ends, however it
// ends, nspawn dies, and with it every process of the machine (a PID namespace's
// processes die with its init), and the overlay, mounted in that namespace, goes away
// with it. Without this, a killed test binary left the machines' systemd running.
func bootMachine(t *testing.T, rootfs, name, netns string) *machine {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := &machine{name: name}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", rootfs, filepath.Join(dir, "upper"), filepath.Join(dir, "work"))
	root := filepath.Join(dir, "root")
	machineName := fmt.Sprintf("scafo-%d-%s", os.Getpid(), name)
	script := `set -e
mount -t overlay overlay -o "$1" "$2"
echo "$3" >"$2/etc/hostname"   # the machine's name, as an installed machine has it
exec systemd-nspawn --boot --register=no --keep-unit --console=passive --quiet \
	--machine="$4" --hostname="$3" --network-namespace-path="$5" -D "$2" -- --show-status=no`
	p := newProc(t, "nspawn-"+name, "unshare", []string{"--mount", "--propagation=private", "--pid", "--fork", "--kill-child",
		"--", "/bin/sh", "-c", script, "sh", opts, root, name, machineName, netns}, nil)
	p.Grace = 0
	p.MustStart(t)
	// Its systemd: the child of nspawn, the child of unshare.
	if err := p.WaitUntil(30*time.Second, func() error {
		for _, nspawn := range children(p.PID()) {
			for _, pid := range children(nspawn) {
				if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
					m.init = pid
					return nil
				}
			}
		}
		return errors.New("no systemd under nspawn yet")
	}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m.root = fmt.Sprintf("/proc/%d/root", m.init)
	var state string
	if err := p.WaitUntil(90*time.Second, func() error {
		out, _ := m.exec("systemctl is-system-running")
		state = strings.TrimSpace(out)
		if state == "running" || state == "degraded" {
			return nil
		}
		return fmt.Errorf("systemctl is-system-running: %q", state)
	}); err != nil {
		t.Fatalf("%s did not boot: %v", name, err)
	}
	if state == "degraded" {
		failed, _ := m.exec("systemctl --failed --no-legend")
		t.Logf("%s booted degraded: %s", name, failed)
	}
	return m
}

// children are pid's child processes.
func children(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// exec runs script in bash (-e -o pipefail) as root in the machine, in /root, with a
// clean environment; it returns stdout, and an error carrying stderr.
func (m *machine) exec(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(m.init), "-a", "--",
		"/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive",
		"/bin/bash", "-e", "-o", "pipefail", "-c", "cd /root\n"+script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%v\nstderr:\n%s", err, stderr.String())
	}
	return stdout.String(), nil
}

// sh is exec that fails the test.
func (m *machine) sh(t *testing.T, script string) string {
	t.Helper()
	out, err := m.exec(script)
	if err != nil {
		t.Fatalf("%s: %s\n%v\nstdout:\n%s", m.name, script, err, out)
	}
	return out
}

// put copies a file of this machine into the machine at path, with mode.
func (m *machine) put(t *testing.T, src, path string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(m.root, path)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}
