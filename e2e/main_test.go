package e2e

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

// binaries resolved once by TestMain.
var bins struct {
	root    string // module root (the directory holding go.mod)
	node    string // scafo-node built from the tree
	traefik string // Traefik binary, or "" when it could not be resolved
	// why the scenarios cannot run ("" when they can).
	unavailable string
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: locating the module root: %v\n", err)
		return 1
	}
	bins.root = root

	tmp, err := os.MkdirTemp("", "scafo-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	if !testing.Short() {
		if err := resolveBinaries(tmp); err != nil {
			bins.unavailable = err.Error()
		}
	} else {
		bins.unavailable = "-short: the Traefik scenarios are skipped"
	}

	code := m.Run()
	if err := results.write(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: writing the report: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// resolveBinaries builds scafo-node and resolves Traefik. A node that does not build is
// a broken tree; a Traefik that cannot be had is an environment problem (skip unless CI).
func resolveBinaries(tmp string) error {
	bins.node = filepath.Join(tmp, "scafo-node")
	build := exec.Command("go", "build", "-o", bins.node, "./node/cmd/scafo-node")
	build.Dir = bins.root
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	if err := build.Run(); err != nil {
		// Not a skip: the tree itself is broken. Report through every scenario.
		bins.node = ""
		return fmt.Errorf("building scafo-node: %v\n%s", err, out.String())
	}

	script := filepath.Join(bins.root, "e2e", "build-traefik.sh")
	resolve := exec.Command("bash", script)
	resolve.Stderr = os.Stderr // a cold build prints its progress
	path, err := resolve.Output()
	if err != nil {
		return fmt.Errorf("resolving Traefik with %s (set TRAEFIK_BIN to use an existing binary): %v", script, err)
	}
	lines := strings.Split(strings.TrimSpace(string(path)), "\n")
	bin := strings.TrimSpace(lines[len(lines)-1])
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("Traefik binary %q from %s is not an executable file", bin, script)
	}
	bins.traefik = bin
	return nil
}

// requireBinaries skips (or, under CI, fails) a scenario that needs the real binaries.
func requireBinaries(t *testing.T) {
	t.Helper()
	if bins.unavailable == "" {
		return
	}
	if bins.node == "" && !testing.Short() && strings.HasPrefix(bins.unavailable, "building scafo-node") {
		t.Fatal(bins.unavailable)
	}
	if os.Getenv("CI") != "" && !testing.Short() {
		t.Fatalf("e2e binaries unavailable under CI: %s", bins.unavailable)
	}
	t.Skipf("e2e scenario skipped: %s", bins.unavailable)
}
