package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/store/s3/s3test"
)

// section is one section of REPORT.md and the measurement that writes it.
type section struct {
	key   string // what -only and -skip name
	title string // its heading in REPORT.md
	needs []string
	// before: the section also measures the older build (-before), when one is given.
	before bool
	run    func(t *task)
}

// sections in the order they run (the order go test ran them in when they were tests);
// REPORT.md lists them in sectionOrder.
var sections = []section{
	{key: "applied", title: secApplied, needs: []string{"scafo-node", "traefik"}, run: waitAppliedIsNeverEarlyByFleetSize},
	{key: "derive", title: secDerive, run: deriveAndRenderGrowLinearly},
	{key: "flip", title: secFleetFlip, needs: []string{"scafo-node", "traefik"}, before: true, run: flipLatencyByFleetSize},
	{key: "front", title: secFront, needs: []string{"traefik"}, run: frontBesideTraefik},
	{key: "groups", title: secGroups, needs: []string{"scafo-node", "traefik"}, run: groupFlips},
	{key: "poll", title: secPoll, needs: []string{"scafo-node", "wrk", "nginx"}, run: pollThroughputAgainstNginx},
	{key: "stability", title: secStability, needs: []string{"scafo-node"}, run: oneETagAcrossTwoNodesAndARestart},
	{key: "storecost", title: secStoreCost, needs: []string{"scafo-node", "minio"}, before: true, run: storeRequestsPerNodePerTick},
	{key: "traefik", title: secTraefik, needs: []string{"traefik", "wrk", "nginx"}, run: func(t *task) {
		t.Run("routing", traefikRoutingCost)
		t.Run("health checks", traefikHealthCheckLoad)
	}},
}

// bins are the binaries the measurements drive, resolved once before they run.
var bins struct {
	root    string // module root
	node    string // scafo-node (SCAFO_NODE_BIN, or built from the tree)
	traefik string // Traefik (TRAEFIK_BIN, or e2e/build-traefik.sh)
	wrk     string
	nginx   string
	// The older build measured beside this tree (-before): its ref, scafo-node and
	// provider plugin source; empty when not measured.
	beforeRef, beforeNode, beforePlugin string
}

// repoRoot is the module root: the nearest directory above the working directory that
// holds go.mod (the program and its tests run anywhere inside the repository).
var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}()

// childEnv makes this program a measuring child instead of a report run: each fleet
// size is measured in its own process so that its peak RSS is its own (derive), and
// the Go controls of the poll comparison serve from their own process (serve).
const childEnv = "SCAFO_BENCH_CHILD"

// self is this program's executable, which the children run again.
func self() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}

func main() {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	var keys []string
	for _, s := range sections {
		keys = append(keys, s.key)
	}
	only := flag.String("only", "", "comma-separated sections to measure, of: "+strings.Join(keys, ", ")+" (default: all)")
	skip := flag.String("skip", "", "comma-separated sections not to measure")
	out := flag.String("report", filepath.Join(repoRoot, "e2e", "bench", "REPORT.md"), "the report to write; with -only or -skip, "+
		"the measured sections replace theirs in it and the rest is kept")
	before := flag.String("before", envOr("SCAFO_BENCH_BEFORE_REF", "e8756a7"), "the commit before issue 13, built in a temporary git worktree "+
		"and measured beside this tree by flip and storecost (\"\" to skip)")
	failFast := flag.Bool("failfast", false, "stop at the first section that fails (default: measure the others and exit 1)")
	list := flag.Bool("list", false, "list the sections and exit")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	if *list {
		for _, s := range sections {
			fmt.Printf("%-10s %s\n", s.key, s.title)
		}
		return
	}
	chosen, err := choose(*only, *skip)
	if err != nil {
		fail(err)
	}
	partial := len(chosen) < len(sections)
	bins.root = repoRoot

	if tempRoot, err = os.MkdirTemp("", "scafo-report-"); err != nil {
		fail(err)
	}
	run := newTask("report")
	run.Cleanup(func() { os.RemoveAll(tempRoot) })
	stopOnSignal()
	var code int
	run.run(func(t *task) {
		resolve(t, chosen, *before)
		report.machineAtStart()
		for _, s := range chosen {
			fmt.Fprintf(os.Stderr, "==> %s: %s\n", s.key, s.title)
			start := time.Now()
			ok := t.Run(s.key, s.run)
			fmt.Fprintf(os.Stderr, "==> %s: %s in %s\n", s.key, map[bool]string{true: "done", false: "FAILED"}[ok], time.Since(start).Round(time.Second))
			if interrupted.Load() || !ok && *failFast {
				break
			}
		}
		if interrupted.Load() {
			t.Fatal("interrupted: the report is left as it was")
		}
		switch wrote, err := report.write(*out, partial, chosen); {
		case err != nil:
			t.Fatalf("writing the report: %v", err)
		case wrote:
			fmt.Fprintf(os.Stderr, "report: wrote %s\n", *out)
		default:
			fmt.Fprintf(os.Stderr, "report: nothing measured, %s left as it was\n", *out)
		}
	})
	if run.Failed() {
		code = 1
	}
	if interrupted.Load() {
		code = 130
	}
	os.Exit(code)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "report: %v (-h for the flags)\n", err)
	os.Exit(2)
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// choose picks the sections -only and -skip select, in run order.
func choose(only, skip string) ([]section, error) {
	split := func(flagName, v string) (map[string]bool, error) {
		set := map[string]bool{}
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k == "" {
				continue
			}
			if !slices.ContainsFunc(sections, func(s section) bool { return s.key == k }) {
				return nil, fmt.Errorf("-%s: no section %q", flagName, k)
			}
			set[k] = true
		}
		return set, nil
	}
	in, err := split("only", only)
	if err != nil {
		return nil, err
	}
	out, err := split("skip", skip)
	if err != nil {
		return nil, err
	}
	var chosen []section
	for _, s := range sections {
		if (len(in) == 0 || in[s.key]) && !out[s.key] {
			chosen = append(chosen, s)
		}
	}
	if len(chosen) == 0 {
		return nil, errors.New("-only and -skip leave no section to measure")
	}
	return chosen, nil
}

// resolve finds or builds every binary the chosen sections need, failing before any
// measurement when one is missing: a report with a silently missing section would
// read as complete.
func resolve(t *task, chosen []section, beforeRef string) {
	need := map[string]bool{}
	withBefore := false
	for _, s := range chosen {
		for _, n := range s.needs {
			need[n] = true
		}
		withBefore = withBefore || s.before
	}
	tmp := t.TempDir()
	if need["scafo-node"] {
		bins.node = os.Getenv("SCAFO_NODE_BIN")
		if bins.node == "" {
			bins.node = filepath.Join(tmp, "scafo-node")
			fmt.Fprintln(os.Stderr, "report: building scafo-node")
			goBuild(t, bins.root, bins.node)
		}
	}
	if need["scafo-node"] && withBefore && beforeRef != "" {
		// The code before issue 13 (store cost, health checks sized for the fleet,
		// serial order), measured beside this tree in the same run.
		dir := filepath.Join(tmp, "before")
		fmt.Fprintf(os.Stderr, "report: building scafo-node at %s (git worktree in %s)\n", beforeRef, dir)
		add := exec.Command("git", "-C", bins.root, "worktree", "add", "--detach", dir, beforeRef)
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("git worktree add %s (-before): %v\n%s", beforeRef, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("git", "-C", bins.root, "worktree", "remove", "--force", dir).CombinedOutput(); err != nil {
				t.Logf("git worktree remove %s: %v\n%s", dir, err, out)
			}
		})
		bins.beforeRef, bins.beforeNode, bins.beforePlugin = beforeRef, filepath.Join(tmp, "scafo-node-before"), filepath.Join(dir, "traefikprovider")
		goBuild(t, dir, bins.beforeNode)
	}
	if bins.node != "" && !fileExists(bins.node) {
		t.Fatalf("SCAFO_NODE_BIN=%s: no such file", bins.node)
	}
	if need["traefik"] {
		bins.traefik = os.Getenv("TRAEFIK_BIN")
		if bins.traefik != "" && !fileExists(bins.traefik) {
			t.Fatalf("TRAEFIK_BIN=%s: no such file", bins.traefik)
		}
		if bins.traefik == "" {
			cmd := exec.Command("bash", filepath.Join(bins.root, "e2e", "build-traefik.sh"))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("resolving Traefik with e2e/build-traefik.sh (or set TRAEFIK_BIN): %v", err)
			}
			lines := strings.Split(string(bytes.TrimSpace(out)), "\n")
			bins.traefik = strings.TrimSpace(lines[len(lines)-1])
		}
		fmt.Fprintf(os.Stderr, "report: Traefik %s\n", bins.traefik)
	}
	if need["wrk"] || need["nginx"] {
		bins.wrk, bins.nginx = lookTools(t)
	}
	if need["minio"] {
		if _, err := s3test.MinIOBinary(); err != nil {
			t.Fatalf("MinIO: %v (run .ci/minio.sh install)", err)
		}
	}
	// perf profiles of the node under load: SCAFO_BENCH_PROFILE=0 leaves them out.
	_, perfErr := exec.LookPath("perf")
	profileEnabled = os.Getenv("SCAFO_BENCH_PROFILE") != "0" && perfErr == nil
}

func goBuild(t *task, dir, out string) {
	build := exec.Command("go", "build", "-o", out, "./node/cmd/scafo-node")
	build.Dir = dir
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building scafo-node in %s: %v\n%s", dir, err, b)
	}
}

// lookTools finds wrk and nginx, installing them with apt-get when missing and running
// as root (Debian: wrk, nginx-light).
func lookTools(t *task) (wrk, nginx string) {
	look := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		// Debian installs nginx under /usr/sbin, which a non-root PATH may lack.
		if alt := "/usr/sbin/" + name; fileExists(alt) {
			return alt
		}
		return ""
	}
	wrk, nginx = look("wrk"), look("nginx")
	var missing []string
	if wrk == "" {
		missing = append(missing, "wrk")
	}
	if nginx == "" {
		missing = append(missing, "nginx-light")
	}
	if len(missing) == 0 {
		return wrk, nginx
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Getuid() != 0 {
		t.Fatalf("missing %s: apt-get install -y wrk nginx-light", strings.Join(missing, " "))
	}
	fmt.Fprintf(os.Stderr, "report: installing %s with apt-get\n", strings.Join(missing, " "))
	install := func() error {
		cmd := exec.Command("apt-get", append([]string{"install", "-y"}, missing...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	if err := install(); err != nil {
		update := exec.Command("apt-get", "update")
		update.Stdout, update.Stderr = os.Stderr, os.Stderr
		if err := update.Run(); err != nil {
			t.Fatalf("apt-get update: %v", err)
		}
		if err := install(); err != nil {
			t.Fatalf("apt-get install -y %s: %v", strings.Join(missing, " "), err)
		}
	}
	if wrk, nginx = look("wrk"), look("nginx"); wrk == "" || nginx == "" {
		t.Fatalf("wrk or nginx still missing after apt-get install -y %s", strings.Join(missing, " "))
	}
	return wrk, nginx
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// live are the children started through newProc and not yet stopped: an interrupt
// stops each by its PID before the program exits.
var live = struct {
	sync.Mutex
	procs map[*proc.Proc]bool
}{procs: map[*proc.Proc]bool{}}

// interrupted is set by the first SIGINT or SIGTERM: the live children are stopped,
// the running measurement fails at its next wait, no further case or section starts,
// the cleanups run and the program exits 130 without writing the report.
var interrupted atomic.Bool

// stopOnSignal handles SIGINT and SIGTERM as interrupted says; a second one exits at
// once. (A child outlives no ending of this program in any case: internal/proc starts
// it with a death signal.)
func stopOnSignal() {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		interrupted.Store(true)
		fmt.Fprintf(os.Stderr, "report: %v: stopping the processes it started (again to exit at once)\n", s)
		live.Lock()
		procs := slices.Collect(maps.Keys(live.procs))
		live.Unlock()
		for _, p := range procs {
			p.Stop(time.Second)
		}
		<-sig
		os.Exit(130)
	}()
}
