package bench

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// enabled is true when SCAFO_BENCH=1: only then do the measurements run.
var enabled = os.Getenv("SCAFO_BENCH") == "1"

// bins are the binaries the measurements drive, resolved once by TestMain.
var bins struct {
	root    string // module root
	node    string // scafo-node (SCAFO_NODE_BIN, or built from the tree)
	traefik string // Traefik (TRAEFIK_BIN, or e2e/build-traefik.sh)
	wrk     string
	nginx   string
	// why a binary is missing, by name.
	missing map[string]string
}

func TestMain(m *testing.M) {
	flag.Parse()
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if !enabled {
		return m.Run()
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: locating the module root: %v\n", err)
		return 1
	}
	bins.root = root
	bins.missing = map[string]string{}
	tmp, err := os.MkdirTemp("", "scafo-bench-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	resolveBinaries(tmp)
	report.machineAtStart()

	code := m.Run()
	if err := report.write(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: writing the report: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func resolveBinaries(tmp string) {
	bins.node = os.Getenv("SCAFO_NODE_BIN")
	if bins.node == "" {
		bins.node = filepath.Join(tmp, "scafo-node")
		build := exec.Command("go", "build", "-o", bins.node, "./node/cmd/scafo-node")
		build.Dir = bins.root
		if out, err := build.CombinedOutput(); err != nil {
			bins.missing["scafo-node"] = fmt.Sprintf("building scafo-node: %v\n%s", err, out)
			bins.node = ""
		}
	}
	bins.traefik = os.Getenv("TRAEFIK_BIN")
	if bins.traefik == "" {
		cmd := exec.Command("bash", filepath.Join(bins.root, "e2e", "build-traefik.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			bins.missing["traefik"] = fmt.Sprintf("resolving Traefik with e2e/build-traefik.sh (or set TRAEFIK_BIN): %v", err)
		} else {
			lines := strings.Split(strings.TrimSpace(string(bytes.TrimSpace(out))), "\n")
			bins.traefik = strings.TrimSpace(lines[len(lines)-1])
		}
	}
	for _, name := range []string{"wrk", "nginx"} {
		p, err := exec.LookPath(name)
		if err != nil {
			// Debian installs nginx under /usr/sbin, which a non-root PATH may lack.
			if alt := "/usr/sbin/" + name; fileExists(alt) {
				p, err = alt, nil
			}
		}
		if err != nil {
			bins.missing[name] = name + " not found (apt-get install -y wrk nginx-light)"
			continue
		}
		switch name {
		case "wrk":
			bins.wrk = p
		case "nginx":
			bins.nginx = p
		}
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// requireBench skips unless SCAFO_BENCH=1, and fails (never skips) when the run was
// asked for but a binary the measurement needs is missing: a report with a silently
// missing section would read as complete.
func requireBench(t *testing.T, need ...string) {
	t.Helper()
	if !enabled {
		t.Skip("measurement: runs only with SCAFO_BENCH=1 (e2e/bench/run.sh)")
	}
	for _, n := range need {
		if why, ok := bins.missing[n]; ok {
			t.Fatal(why)
		}
	}
}
