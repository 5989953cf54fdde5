package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/client"
)

// runSplit runs the binary with no SCAFO_* variables and returns stdout, stderr and the
// exit code.
func runSplit(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	// A command that should stop at once but serves (a second node the state dir does
	// not refuse) is killed after a while: the test fails rather than hangs.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = envWithoutScafo()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("scafo-node %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// TestCLIReadsLikeAUnixTool is the command-line rows of issue 35's table: each mistake
// is one line on stderr, "scafo-node: " and what is wrong (no paerser "command … error",
// no help page dumped before it), with the closest right spelling; help and version are
// commands, --version works.
func TestCLIReadsLikeAUnixTool(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		args   []string
		stderr string // the whole of stderr
		code   int    // 0: 1; the node's configuration exits 78 (EX_CONFIG: the unit does not restart it)
	}{
		{[]string{"--listne=:7401"}, "scafo-node: unknown flag --listne (did you mean --listen?)\n", exitConfig},
		{[]string{"--probe.interval=fast"}, "scafo-node: --probe.interval: invalid duration \"fast\" (Go's syntax: 250ms, 2s, 10m, 720h; a bare number is seconds)\n", exitConfig},
		{[]string{"--log.level=verbose"}, "scafo-node: log.level \"verbose\": one of debug, info, warn, error (from flag --log.level)\n", exitConfig},
		{[]string{"routes", "--jsno"}, "scafo-node: unknown flag --jsno (did you mean --json?)\n", 1},
		{[]string{"apps", "get", "shop", "--jsno"}, "scafo-node: unknown flag --jsno (did you mean --json?)\n", 1},
		{[]string{"hepl"}, "scafo-node: unknown command \"hepl\" (did you mean help?); scafo-node --help lists the commands\n", 1},
		{[]string{"apps", "pt"}, "scafo-node: unknown command \"apps pt\" (did you mean put?): usage: scafo-node apps <command> [arguments] [flags]\n", 1},
		{[]string{"store", "adopt", "--statdir=/x"}, "scafo-node: unknown flag --statdir (did you mean --stateDir?)\n", 1},
		{[]string{"routes", "--url=ftp://node:7400"}, "scafo-node: --url \"ftp://node:7400\": want http://host:port or https://host:port (a bare host:port is taken as http)\n", 1},
		{[]string{"help", "--json"}, "scafo-node: unknown flag --json: usage: scafo-node help [command…]\n", 1},
	} {
		stdout, stderr, code := runSplit(t, bin, tc.args...)
		want := tc.code
		if want == 0 {
			want = 1
		}
		if code != want || stderr != tc.stderr || stdout != "" {
			t.Errorf("scafo-node %v: exit %d, stderr %q, stdout %q; want exit %d, stderr %q and no stdout", tc.args, code, stderr, stdout, want, tc.stderr)
		}
	}

	versionRE := regexp.MustCompile(`^scafo-node dev \(commit [0-9a-z+]+, ` + regexp.QuoteMeta(runtime.Version()) + `\)\n$`)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		stdout, stderr, code := runSplit(t, bin, args...)
		if code != 0 || !versionRE.MatchString(stdout) || stderr != "" {
			t.Errorf("scafo-node %v: exit %d, stdout %q, stderr %q; want %s", args, code, stdout, stderr, versionRE)
		}
	}
	root, _, code := runSplit(t, bin, "--help")
	for _, args := range [][]string{{"help"}, {"help", "apps", "put"}, {"apps", "put", "--help"}} {
		stdout, stderr, c := runSplit(t, bin, args...)
		if c != 0 || stderr != "" || !strings.Contains(stdout, "Usage: scafo-node") {
			t.Errorf("scafo-node %v: exit %d, stderr %q, stdout %q", args, c, stderr, stdout)
		}
		if args[0] == "help" && len(args) == 1 && stdout != root {
			t.Errorf("scafo-node help differs from scafo-node --help (exit %d)", code)
		}
		if len(args) > 1 && !strings.Contains(stdout, "replaced as a whole") {
			t.Errorf("scafo-node %v does not say apps put replaces the application whole:\n%s", args, stdout)
		}
	}
}

// TestVersionLine: the version and commit come from -ldflags -X main.version, -X
// main.commit; the Go version from the runtime.
func TestVersionLine(t *testing.T) {
	saved, savedCommit := version, commit
	defer func() { version, commit = saved, savedCommit }()
	version, commit = "v0.3.0", "abc1234"
	if got, want := versionLine(), "scafo-node v0.3.0 (commit abc1234, "+runtime.Version()+")"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// TestHelpPrintsDefaultsAsTheReference: every default --help prints is the one
// docs/configuration.md writes (250ms, 10m, 720h: not 0, not bare seconds), with the
// setting's environment variable.
func TestHelpPrintsDefaultsAsTheReference(t *testing.T) {
	bin := buildBinary(t)
	help, _, code := runSplit(t, bin, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	ref, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rowRE := regexp.MustCompile("^\\| `[^`]+` \\| `(--[^`]+)` \\| `(SCAFO_[A-Z0-9_]+)` \\| `([^`]*)` \\|")
	rows := 0
	sc := bufio.NewScanner(bytes.NewReader(ref))
	for sc.Scan() {
		m := rowRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue // a computed default (prose), or not a row
		}
		rows++
		if want := m[1] + "  (Default: " + m[3] + ")  [" + m[2] + "]"; !strings.Contains(help, want) {
			t.Errorf("--help does not say %q", want)
		}
	}
	if rows < 50 {
		t.Fatalf("only %d rows with a literal default in docs/configuration.md", rows)
	}
	for _, want := range []string{"--reconcile.publishWindow  (Default: 250ms)", "--traefik.retry.initialInterval  (Default: 200ms)",
		"--ports.quarantine  (Default: 10m)", "--audit.retention  (Default: 720h)"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not say %q", want)
		}
	}
}

// TestSecondNodeOnAStateDirIsRefused: a node started on a state dir another live node
// holds stops at once, naming the holder's pid (it was not refused; the first node
// noticed at its next heartbeat); the start line names the store.
func TestSecondNodeOnAStateDirIsRefused(t *testing.T) {
	bin := buildBinary(t)
	state := filepath.Join(t.TempDir(), "state")
	addr := freePort(t)
	first := exec.Command(bin, "--listen="+addr, "--stateDir="+state, "--node.name=vps-a")
	first.Env = envWithoutScafo()
	var logs proc.Buffer
	first.Stderr = &logs
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { first.Process.Signal(syscall.SIGTERM); first.Wait() }()
	if err := proc.Poll(20*time.Second, proc.Tick, func() error { return proc.HTTPOK(nil, "http://"+addr+"/v1/readyz") }); err != nil {
		t.Fatalf("the first node is not ready (%v):\n%s", err, logs.String())
	}
	if want := "store=dir:" + filepath.Join(state, "store"); !strings.Contains(logs.String(), want) {
		t.Errorf("the start line does not name the store (%s):\n%s", want, logs.String())
	}
	_, stderr, code := runSplit(t, bin, "--listen="+freePort(t), "--stateDir="+state, "--node.name=vps-b")
	want := "scafo-node: state dir " + state + " is held by another scafo-node (pid " + strconv.Itoa(first.Process.Pid) + ", "
	if code != 1 || !strings.HasPrefix(stderr, want) {
		t.Fatalf("a second node on the state dir: exit %d, stderr %q; want it refused with %q", code, stderr, want)
	}
}

// TestCLIErrorsAndWarningsSpeakToTheUser: against a running node, an error names the
// verb and says what the node said without where its store keeps the object, a write's
// warnings reach stderr, a bare host:port is a --url, and flags may come before the
// command.
func TestCLIErrorsAndWarningsSpeakToTheUser(t *testing.T) {
	bin := buildBinary(t)
	n := startTestNode(t)
	hostPort := strings.TrimPrefix(n.url, "http://")

	_, stderr, code := runSplit(t, bin, "apps", "get", "nosuch", "--url="+hostPort, "--token="+n.admin)
	// Refused by the node: exit 2 (node/client/exit.go), not 1 (a usage error).
	if want := "scafo-node: apps get: not found: reading application nosuch (404 Not Found)\n"; code != client.ExitRefused || stderr != want {
		t.Errorf("apps get nosuch: exit %d, stderr %q; want exit 2 and %q", code, stderr, want)
	}
	if strings.Contains(stderr, "store") || strings.Contains(stderr, ".json") || strings.Contains(stderr, "/v1/") {
		t.Errorf("apps get nosuch names the store or the API path: %q", stderr)
	}
	_, stderr, code = runSplit(t, bin, "apps", "put", "Bad_App", "--account=acme", "--url="+hostPort, "--token="+n.admin)
	if want := "scafo-node: apps put: invalid app: "; code != client.ExitRefused || !strings.HasPrefix(stderr, want) || !strings.HasSuffix(stderr, " (400 Bad Request)\n") {
		t.Errorf("apps put Bad_App: exit %d, stderr %q", code, stderr)
	}

	// Flags before the command, as kubectl takes them; a warning on stderr.
	var stdout string
	_ = proc.Poll(10*time.Second, 100*time.Millisecond, func() error {
		stdout, stderr, code = runSplit(t, bin, "--url", hostPort, "--token="+n.admin, "apps", "put", "shop", "--account=acme", "--placement=vps-a,vsp-b")
		if code != 0 || strings.Contains(stderr, "warning") {
			return nil
		}
		return errors.New("no warning yet") // (none before the node's first pass has read the node records)
	})
	if code != 0 || !strings.Contains(stdout, "placement  vps-a > vsp-b") ||
		!strings.HasPrefix(stderr, `scafo-node: warning: placement names node "vsp-b", which no node record names`) {
		t.Errorf("apps put on a node no record names: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
