package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/internal/walkthrough"
)

// The walkthroughs of README.md and docs/api.md, run as written (issue 16, item 1;
// issue 28 moved the long one into docs/api.md).
//
// In each file, the sh blocks between a line starting "<!-- walkthrough:" and the line
// "<!-- walkthrough end -->" run in order, in one bash (set -e -o pipefail), in a fresh
// directory beside a freshly started node, so variables carry from block to block as
// they do in a terminal. A text block right after a sh block is what that block prints:
// each line is matched whole, "…" standing for any run of characters and "<word>" for
// one run of non-space characters. The two files are two independent runs, each on its
// own node: the README's is the smallest path to a routed host and a flip, docs/api.md's
// is the whole API tour.
//
// The first block starts the node. It is not run (it would start a node with `go run`,
// and the README's also recurses into `make test`): the test checks it is the file's
// start commands (walkthroughs below), starts the built binary in their place, and
// matches the node's first log line against the text block after it. What else the test
// substitutes, and why:
//
//   - The port. The docs' node listens on :7400; the test's on a free port, written
//     for "7400" in the blocks and the expected outputs, and given to the CLI as
//     SCAFO_URL (the CLI's documented fallback for --url).
//   - The instance ports. The docs' node allocates from ports.min (24000): 24000 to
//     24003 are the two applications' pairs. The test's node gets --ports.min and
//     --ports.max around four free ports below the ephemeral range, written for 24000 to
//     24003 in the blocks and outputs, so a walkthrough never contends for a port another
//     test on the machine holds.
//   - `make build` and `make echo`: a shell function copies the binaries the test built
//     (scafo-node, the demo's echo application) to ./scafo-node and ./echo-app and prints
//     what the Makefile's recipes print (checked with `make -n build`, `make -n echo`).
//   - The state dir, as root: a test must not use the machine's /var/lib/scafo, so the
//     root run sets SCAFO_STATEDIR=./scafo-state (relative: the log line and every path are
//     then the docs'). The non-root run uses the real default, ./scafo-state.
//
// A walkthrough starts the two applications in the background (as a supervisor would:
// the node probes its instances) and stops them at its end. The shell runs in its own
// process group: the test checks that the group is empty once the walkthrough is done
// (the docs stop what they start), and kills the group whatever happens.
//
// Each runs twice: as the current user and, when that is root, as the unprivileged user
// nobody (setuid in the child; no account is created).
func TestREADMEWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the walkthroughs wait for reconcile passes (~15 s each)")
	}
	for _, tool := range []string{"bash", "curl", "jq", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not found: the walkthroughs need it", tool)
			}
			t.Skipf("%s not found: the walkthroughs need it", tool)
		}
	}
	stub := makeStub{
		buildLine: makeRecipe(t, "build", "go build -o scafo-node ./node/cmd/scafo-node"),
		echoLine:  makeRecipe(t, "echo", "go build -o echo-app ./deploy/demo/echo"),
		node:      buildBinary(t),
		echo:      filepath.Join(t.TempDir(), "echo-app"),
	}
	build := exec.Command("go", "build", "-o", stub.echo, "./deploy/demo/echo")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./deploy/demo/echo: %v\n%s", err, out)
	}
	for _, w := range walkthroughs {
		t.Run(strings.ReplaceAll(w.path, "/", "_"), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("../../..", w.path))
			if err != nil {
				t.Fatal(err)
			}
			blocks := walkthroughBlocks(t, w.path, string(b))
			start := blocks[0]
			if got := shellCommands(start.code); strings.Join(got, "\n") != strings.Join(w.start, "\n") {
				t.Fatalf("%s line %d: the walkthrough's first block is not %q: %q", w.path, start.line, w.start, got)
			}
			if start.want == "" {
				t.Fatalf("%s line %d: the first block has no text block after it (the node's first log line)", w.path, start.line)
			}
			t.Run("current-user", func(t *testing.T) {
				runWalkthrough(t, stub, w.path, blocks, nil)
			})
			t.Run("non-root", func(t *testing.T) {
				if os.Geteuid() != 0 {
					t.Skip("the current user is not root: the current-user run was the non-root one")
				}
				u, err := user.Lookup("nobody")
				if err != nil {
					t.Skipf("no user nobody to run as (%v); the current-user run covered root only", err)
				}
				uid, _ := strconv.Atoi(u.Uid)
				gid, _ := strconv.Atoi(u.Gid)
				runWalkthrough(t, stub, w.path, blocks, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)})
			})
		})
	}
}

// walkthroughs are the files whose walkthrough runs, and the commands of each one's
// first block (the start of the node, which the test does itself).
var walkthroughs = []struct {
	path  string // from the repository root
	start []string
}{
	{"README.md", []string{"go run ./node/cmd/scafo-node", "make test"}},
	{"docs/api.md", []string{"go run ./node/cmd/scafo-node"}},
}

// makeStub is what the walkthrough's `make` does: the Makefile's recipes (the lines
// `make -n` prints), with the binaries the test built.
type makeStub struct {
	buildLine, echoLine string // what `make build` and `make echo` print
	node, echo          string // the binaries they copy
}

// makeRecipe is what `make <target>` prints, checked against want (the README's text
// blocks print it, and the stub copies a binary for it).
func makeRecipe(t *testing.T, target, want string) string {
	t.Helper()
	mk := exec.Command("make", "-s", "-n", "--no-print-directory", "-C", "../../..", target)
	for _, kv := range os.Environ() { // not the flags of a `make test` this runs under
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			mk.Env = append(mk.Env, kv)
		}
	}
	out, err := mk.Output()
	if err != nil {
		t.Fatalf("make -n %s: %v", target, err)
	}
	line := strings.TrimSpace(string(out))
	if line != want {
		t.Fatalf("make %s prints %q, not %q: update the README and this test's stub", target, line, want)
	}
	return line
}

// readmeBlock is one sh block of the walkthrough and the text block after it, if any.
type readmeBlock struct {
	line int // of the opening fence, 1-based
	code string
	want string
}

var fenceRE = regexp.MustCompile("^```([a-z]*)\\s*$")

func walkthroughBlocks(t *testing.T, path, text string) []readmeBlock {
	t.Helper()
	lines := strings.Split(text, "\n")
	var blocks []readmeBlock
	in, done, after := false, false, 0 // after: the line after the last sh block's closing fence
	for i := 0; i < len(lines) && !done; i++ {
		switch {
		case strings.HasPrefix(lines[i], "<!-- walkthrough:"):
			in = true
		case lines[i] == "<!-- walkthrough end -->":
			done = true
		case in && fenceRE.MatchString(lines[i]):
			lang := fenceRE.FindStringSubmatch(lines[i])[1]
			j := i + 1
			for j < len(lines) && lines[j] != "```" {
				j++
			}
			body := strings.Join(lines[i+1:j], "\n")
			switch {
			case lang == "sh":
				blocks, after = append(blocks, readmeBlock{line: i + 1, code: body}), j+1
			case lang == "text" && len(blocks) > 0 && blocks[len(blocks)-1].want == "" &&
				(len(blocks) == 1 || strings.TrimSpace(strings.Join(lines[after:i], "")) == ""):
				// Right after its block; the first block's (the log line) may follow prose.
				blocks[len(blocks)-1].want = body
			}
			i = j
		}
	}
	if !done {
		t.Fatalf("%s: no walkthrough (a line starting \"<!-- walkthrough:\", then \"<!-- walkthrough end -->\")", path)
	}
	if len(blocks) < 2 {
		t.Fatalf("%s: found %d sh blocks in the walkthrough", path, len(blocks))
	}
	return blocks
}

// shellCommands are a block's commands, comments and blank lines left out.
func shellCommands(code string) []string {
	var out []string
	for l := range strings.Lines(code) {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

const blockEnd = "@@scafo-readme-block-end@@"

// runWalkthrough starts a node in a fresh directory and runs the blocks after the first
// in one bash beside it, as cred (nil: the current user).
func runWalkthrough(t *testing.T, stub makeStub, path string, blocks []readmeBlock, cred *syscall.Credential) {
	work, err := os.MkdirTemp("", "scafo-readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	// The binaries, where the make stub copies them from (mode 0755: nobody runs them).
	nodeBin := filepath.Join(work, ".bin", "scafo-node")
	echoBin := filepath.Join(work, ".bin", "echo-app")
	if err := os.MkdirAll(filepath.Dir(nodeBin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(stub.node, nodeBin); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(stub.echo, echoBin); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		for _, p := range []string{work, filepath.Dir(nodeBin), nodeBin, echoBin} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	port := strings.TrimPrefix(freePort(t), "127.0.0.1:")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work, "LANG=C.UTF-8", "SCAFO_URL=http://127.0.0.1:" + port}
	if cred == nil && os.Geteuid() == 0 {
		env = append(env, "SCAFO_STATEDIR=./scafo-state")
	}
	inst := instancePorts(t)
	sub := strings.NewReplacer("7400", port,
		"24000", strconv.Itoa(inst), "24001", strconv.Itoa(inst+1),
		"24002", strconv.Itoa(inst+2), "24003", strconv.Itoa(inst+3)).Replace

	// The quick start: the node with no configuration but the ports.
	node := exec.Command(nodeBin, "--listen=:"+port,
		"--ports.min="+strconv.Itoa(inst), "--ports.max="+strconv.Itoa(inst+instanceRange-1))
	node.Dir, node.Env = work, env
	if cred != nil {
		node.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	logs, err := node.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		node.Process.Signal(syscall.SIGTERM)
		node.Wait()
	})
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "scafo-node serving") {
				first <- sc.Text()
			}
			if testing.Verbose() {
				fmt.Fprintln(os.Stderr, "node:", sc.Text())
			}
		}
	}()
	select {
	case line := <-first:
		if !walkthrough.Match(sub(blocks[0].want), line) {
			t.Errorf("%s line %d: the node's first line\n  got  %s\n  want %s", path, blocks[0].line, line, sub(blocks[0].want))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the node logged no \"scafo-node serving\" line in 30 s")
	}
	// Ready, and its own record folded in: the first pass can run before the node's
	// first heartbeat is written, and publishes a document without the node API then
	// (a person typing the next command never sees it; a script can).
	proc.WaitFor(t, "the node ready, with the node API in its document", 20*time.Second, func() error {
		tok, _ := os.ReadFile(filepath.Join(work, "scafo-state", "ingress-token"))
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/v1/ingress/routes", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"api"`) {
			return errors.New("no node API in the document yet")
		}
		return nil
	})

	// The rest, in one shell.
	var script strings.Builder
	script.WriteString("set -e -o pipefail\n")
	fmt.Fprintf(&script, "make() { case \"$*\" in build) echo %q; cp %q ./scafo-node;; echo) echo %q; cp %q ./echo-app;; *) echo \"make stub: only build, echo\" >&2; return 2;; esac; }\n",
		stub.buildLine, nodeBin, stub.echoLine, echoBin)
	for _, b := range blocks[1:] {
		script.WriteString(sub(b.code))
		fmt.Fprintf(&script, "\necho; echo %s\n", blockEnd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", script.String())
	sh.Dir, sh.Env = work, env
	// Its own process group (its pgid is its pid), so what it starts in the background
	// is found and stopped with it, even when a block fails midway.
	sh.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	sh.WaitDelay = 5 * time.Second // a background process holding stdout does not hang the test
	var stderr strings.Builder
	sh.Stderr = &stderr
	stdout, err := sh.Output()
	if sh.Process != nil {
		pgid := sh.Process.Pid
		t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
		if err == nil {
			// The README stops what it starts: nothing of the group outlives the walkthrough.
			if proc.Poll(5*time.Second, 50*time.Millisecond, func() error {
				if syscall.Kill(-pgid, 0) == nil {
					return errors.New("the group has a process")
				}
				return nil
			}) != nil {
				t.Errorf("the walkthrough of %s left processes running (process group %d): it must stop what it starts", path, pgid)
			}
		}
	}
	outs := strings.Split(string(stdout), blockEnd+"\n")
	if err != nil {
		n := len(outs) - 1 // blocks that finished
		at := blocks[min(n+1, len(blocks)-1)]
		t.Fatalf("%s line %d: the block failed: %v\nits output:\n%s\nstderr:\n%s\nthe block:\n%s", path, at.line, err, outs[len(outs)-1], stderr.String(), at.code)
	}
	for i, b := range blocks[1:] {
		if b.want == "" {
			continue
		}
		got := strings.TrimSuffix(outs[i], "\n")
		got = strings.TrimSuffix(got, "\n") // the echo after the block
		if !walkthrough.Match(sub(b.want), got) {
			t.Errorf("%s line %d: the block's output differs from the text block after it\n--- got\n%s\n--- want\n%s", path, b.line, got, sub(b.want))
		}
	}
	if t.Failed() {
		t.Logf("stderr of the walkthrough:\n%s", stderr.String())
	}
}

// instanceRange is how many ports the walkthrough's node may allocate (ports.min to
// ports.max): the two pairs, and room for a third application.
const instanceRange = 8

// instancePorts is the first of instanceRange consecutive ports, all free when looked
// at, below Linux's ephemeral range (32768 on) so no listener of the node's own API
// (an ephemeral port) lands inside it, and outside 24000-25999, which other test
// suites on the machine use.
func instancePorts(t *testing.T) int {
	t.Helper()
	rnd := uint32(time.Now().UnixNano())
	for try := 0; try < 200; try++ {
		rnd = rnd*1664525 + 1013904223
		base := 30000 + int(rnd%2500)
		ok := true
		for p := base; p < base+instanceRange && ok; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no run of free ports in 30000-32507 for the walkthrough's instances")
	return 0
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}
