package render

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTraefikDecodesTheRender hands renders to Traefik v3.6.12's own code
// (testdata/traefikcheck): its HTTP provider decoder, a strict encoding/json decode
// into its types, its service manager building every router's service (the failover
// health-check wiring fails there if wrong), and its HTTP muxer parsing every rule and
// routing probe requests; every router's middlewares resolving and the retry
// middleware built by Traefik's retry.New, and once run through a real service (a POST
// during a one-second restart answered; one whose headers reached the server never sent
// twice). The probes are the golden probes, flipProbes, and every
// adversarial path of TestFlipInvariantHoldsForAdversarialSpellings with the router our
// rule evaluator picked, so the flip-invariant result is shown to hold in Traefik's
// muxer and not only in the evaluator.
//
// Opt-in: it builds part of Traefik in a throwaway module (minutes when cold), so it
// runs only with SCAFO_TRAEFIK_DECODE=1 and the Traefik module and its dependencies
// reachable (module cache or proxy).
func TestTraefikDecodesTheRender(t *testing.T) {
	if os.Getenv("SCAFO_TRAEFIK_DECODE") != "1" {
		t.Skip("set SCAFO_TRAEFIK_DECODE=1 to run Traefik v3.6.12's decoders and muxer on the render")
	}
	type input struct {
		Name       string          `json:"name"`
		Config     json.RawMessage `json:"config"`
		Probes     []probe         `json:"probes"`
		RetryCheck bool            `json:"retryCheck"`
	}
	var inputs []input
	for _, c := range loadCases(t) {
		out, err := Traefik(c.doc, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{Name: c.name, Config: out, Probes: goldenProbes[c.name]})
	}
	paths := adversarialPaths()
	for _, threshold := range []int{0, 1} {
		out, err := Traefik(flipDoc(), Options{PathGroupThreshold: threshold})
		if err != nil {
			t.Fatal(err)
		}
		routers := compileRouters(t, decodeStrict(t, out))
		probes := flipProbes(threshold)
		for _, p := range paths {
			rp, _, ok := traefikEntry(p)
			if !ok || strings.ContainsAny(p, "\\") {
				continue
			}
			probes = append(probes, probe{"ti.to", p, route(t, routers, request{host: "ti.to", routingPath: rp})})
		}
		inputs = append(inputs, input{Name: "flip/threshold=" + strconv.Itoa(threshold), Config: out, Probes: probes})
	}
	for seed := range uint64(40) {
		body, probes := hostileCase(t, seed)
		inputs = append(inputs, input{Name: "hostile/seed=" + strconv.FormatUint(seed, 10), Config: body, Probes: probes})
	}
	gen, err := Traefik(generatedDoc(t, 1000, 10000), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The default retry middleware through Traefik's retry and service code: a POST
	// during a one-second restart is answered, one whose headers reached the server is
	// never sent twice.
	inputs = append(inputs, input{Name: "generated-1000-apps", Config: gen, RetryCheck: true})

	dir := t.TempDir()
	data, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "inputs.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", "traefikcheck", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(wrapperGoMod(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("go %s:\n%s", strings.Join(args, " "), out)
	}
	goCmd("mod", "tidy", "-e")
	// -trimpath, as e2e/build-traefik.sh builds Traefik (make deps, before the unit
	// tests): the Traefik packages this program imports are then build-cache hits and
	// only main.go compiles (the same flags, the same build list).
	goCmd("run", "-trimpath", ".", filepath.Join(dir, "inputs.json"))
}

// wrapperGoMod requires Traefik and copies its replace and exclude directives, which
// its go.mod needs to resolve (the e2e build script does the same).
func wrapperGoMod(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	modFile := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(traefikModule), "go.mod")
	src, err := os.ReadFile(modFile)
	if err != nil {
		t.Skipf("Traefik's go.mod not in the module cache (go mod download %s): %v", traefikModule, err)
	}
	var b strings.Builder
	b.WriteString("module scafo.local/traefikcheck\n\n")
	b.WriteString(regexp.MustCompile(`(?m)^go [0-9.]+$`).FindString(string(src)) + "\n\n")
	b.WriteString("require github.com/traefik/traefik/v3 " + strings.TrimPrefix(traefikModule, "github.com/traefik/traefik/v3@") + "\n\n")
	block := false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case block:
			b.WriteString(line + "\n")
			block = strings.TrimSpace(line) != ")"
		case strings.HasPrefix(line, "replace (") || strings.HasPrefix(line, "exclude ("):
			b.WriteString(line + "\n")
			block = true
		case strings.HasPrefix(line, "replace ") || strings.HasPrefix(line, "exclude "):
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
