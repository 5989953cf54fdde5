package render

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestTraefikDecodesTheRender hands renders to Traefik's own code, v3.6.12's and
// v3.7.13's (testdata/traefikcheck, traefikDecodeVersions): its HTTP provider decoder,
// a strict encoding/json decode into its types, its service manager building every
// router's service (the failover health-check wiring fails there if wrong), and its
// HTTP muxer parsing every rule and routing probe requests; every router's middlewares
// resolving and the retry middleware built by Traefik's retry.New, and once run through
// a real service (a POST during a one-second restart answered; one whose headers
// reached the server never sent twice). The probes are the golden probes, flipProbes,
// and every adversarial path of TestFlipInvariantHoldsForAdversarialSpellings with the
// router our rule evaluator picked, so the flip-invariant result is shown to hold in
// Traefik's muxer and not only in the evaluator. Its TCP muxer routes the server names
// of sniCase: what each version folds onto a passthrough host (docs/traefik.md,
// "Verified Traefik versions").
//
// Opt-in: it builds part of Traefik in a throwaway module (minutes when cold; the
// module's go.mod is e2e/traefik-module.sh's), so it runs only with
// SCAFO_TRAEFIK_DECODE set and the Traefik module and its dependencies reachable
// (module cache or proxy): 1 for v3.6.12 (make test), a version or a comma-separated
// list of versions of traefikDecodeVersions, or "all".
func TestTraefikDecodesTheRender(t *testing.T) {
	versions := decodeVersions(t, os.Getenv("SCAFO_TRAEFIK_DECODE"))
	if len(versions) == 0 {
		t.Skip("set SCAFO_TRAEFIK_DECODE=1 (v3.6.12), =v3.7.13 or =all to run Traefik's decoders and muxers on the render")
	}
	t.Parallel() // mostly a go build in another process
	type input struct {
		Name       string          `json:"name"`
		Config     json.RawMessage `json:"config"`
		Probes     []probe         `json:"probes"`
		RetryCheck bool            `json:"retryCheck"`
		SNIProbes  []sniProbe      `json:"sniProbes"`
	}
	var inputs []input
	for _, c := range loadCases(t) {
		out := mustTraefik(t, c.doc, c.opt)
		inputs = append(inputs, input{Name: c.name, Config: out, Probes: goldenProbes[c.name]})
	}
	paths := adversarialPaths()
	for _, threshold := range []int{0, 1} {
		out := mustTraefik(t, flipDoc(), Options{PathGroupThreshold: threshold})
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
	gen := mustTraefik(t, generatedDoc(t, 1000, 10000), Options{})
	// The default retry middleware through Traefik's retry and service code: a POST
	// during a one-second restart is answered, one whose headers reached the server is
	// never sent twice.
	inputs = append(inputs, input{Name: "generated-1000-apps", Config: gen, RetryCheck: true})

	for _, v := range versions {
		t.Run(v.version, func(t *testing.T) {
			config, sni := sniCase(t, v)
			checkWithTraefik(t, v, append(inputs[:len(inputs):len(inputs)], input{Name: "passthrough/server-names", Config: config, SNIProbes: sni}))
		})
	}
}

// traefikDecodeVersions are the Traefik versions TestTraefikDecodesTheRender builds its
// checker against: tags selects the checker's muxer file (testdata/traefikcheck), and
// foldsLongS says whether HostSNI matches with strings.EqualFold (v3.7's
// muxer.DomainMatchHostExpression), which folds U+017F LATIN SMALL LETTER LONG S onto
// "s"; v3.6 compares the lowercased name with ==.
var traefikDecodeVersions = []traefikVersion{
	{version: "v3.6.12"},
	{version: "v3.7.13", tags: "traefik37", foldsLongS: true},
}

type traefikVersion struct {
	version    string
	tags       string
	foldsLongS bool
}

// decodeVersions reads SCAFO_TRAEFIK_DECODE: "" none, "1" v3.6.12, "all" every
// version, or a comma-separated list of versions.
func decodeVersions(t *testing.T, env string) []traefikVersion {
	t.Helper()
	switch env {
	case "":
		return nil
	case "1":
		return traefikDecodeVersions[:1]
	case "all":
		return traefikDecodeVersions
	}
	var out []traefikVersion
	for _, want := range strings.Split(env, ",") {
		i := slices.IndexFunc(traefikDecodeVersions, func(v traefikVersion) bool { return v.version == strings.TrimSpace(want) })
		if i < 0 {
			t.Fatalf("SCAFO_TRAEFIK_DECODE=%s: %q is not one of the verified versions (traefikDecodeVersions)", env, want)
		}
		out = append(out, traefikDecodeVersions[i])
	}
	return out
}

type sniProbe struct {
	ServerName string `json:"serverName"`
	Want       string `json:"want"`
}

// sniCase renders the passthrough golden with three more passthrough hosts (one with
// each ASCII letter that a non-ASCII character folds onto: k, i, s) and gives the
// server names Traefik's TCP muxer must route, with the router each must reach under
// version v ("": none). Traefik lowercases the server name (types.CanonicalDomain:
// strings.TrimSpace, then Unicode's strings.ToLower: U+212A KELVIN SIGN becomes "k",
// U+0130 "i"), then compares it with the HostSNI host: v3.6 with ==, v3.7 with
// strings.EqualFold, which also folds U+017F onto "s". U+0131 (dotless i) folds onto
// nothing ASCII in either.
func sniCase(t *testing.T, v traefikVersion) (json.RawMessage, []sniProbe) {
	t.Helper()
	pt := passthroughCase(t)
	doc := *pt.doc
	doc.Routes = slices.Clone(doc.Routes)
	var db routing.Route
	for _, r := range doc.Routes {
		if r.Host == "db.example.org" {
			db = r
		}
	}
	for _, h := range []string{"kv.example.org", "imap.example.org", "ssh.example.org"} {
		r := db
		r.Host = h
		doc.Routes = append(doc.Routes, r)
	}
	slices.SortFunc(doc.Routes, func(a, b routing.Route) int { return strings.Compare(a.Host, b.Host) })
	out := mustTraefik(t, &doc, pt.opt)
	router := map[string]string{}
	for name, r := range decodeStrict(t, out).TCP.Routers {
		host := strings.TrimSuffix(strings.TrimPrefix(r.Rule, "HostSNI(`"), "`)")
		router[host] = name
	}
	if len(router) != 7 {
		t.Fatalf("want 7 passthrough hosts' TCP routers, got %v", router)
	}
	unless := func(folds bool, r string) string {
		if folds {
			return r
		}
		return ""
	}
	var probes []sniProbe
	for host, r := range router {
		probes = append(probes,
			sniProbe{host, r},
			sniProbe{strings.ToUpper(host), r},
			sniProbe{" " + host + "\t", r}, // TrimSpace
			sniProbe{host + ".", ""},
			sniProbe{"x" + host, ""},
		)
		for _, f := range []struct {
			ascii, other string
			folds        bool
		}{
			{"k", "\u212a", true},
			{"i", "\u0130", true},
			{"i", "\u0131", false},
			{"s", "\u017f", v.foldsLongS},
		} {
			if strings.Contains(host, f.ascii) {
				probes = append(probes, sniProbe{strings.Replace(host, f.ascii, f.other, 1), unless(f.folds, r)})
			}
		}
	}
	slices.SortFunc(probes, func(a, b sniProbe) int { return strings.Compare(a.ServerName, b.ServerName) })
	return out, probes
}

// checkWithTraefik builds testdata/traefikcheck against Traefik v in a throwaway module
// and runs it on inputs.
func checkWithTraefik(t *testing.T, v traefikVersion, inputs any) {
	t.Helper()
	dir := t.TempDir()
	data, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "inputs.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srcs, err := filepath.Glob(filepath.Join("testdata", "traefikcheck", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range srcs {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The go.mod e2e/build-traefik.sh builds Traefik with: the same build list, and for
	// v3.7 the same replacements of what the module proxy refuses.
	gomod, err := exec.Command("bash", filepath.Join("..", "e2e", "traefik-module.sh"), v.version, "scafo.local/traefikcheck").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("e2e/traefik-module.sh %s: %v\n%s", v.version, err, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
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
	goCmd("run", "-trimpath", "-tags="+v.tags, ".", filepath.Join(dir, "inputs.json"))
}
