package layering

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const mod = "github.com/scafo/ingress/"

// The import direction: cmd → node → httpapi → {publish, reconcile, ingress, probe, self,
// fleetwrite, certstore, fleetcerts, …} → {store, render/…}. node/api imports no node
// package; no subsystem imports httpapi or the root; node/client depends on none of the
// server's heavy dependencies. A package listed here that does not exist yet is
// skipped, so the rules hold as packages appear.
var (
	// subsystems own the node's state; they sit below httpapi and the root.
	subsystems = []string{
		"node/publish", "node/reconcile", "node/ingress", "node/probe", "node/self",
		"node/fleetwrite", "node/certstore", "node/fleetcerts", "node/storageclient",
		"node/store", "internal/bucket", "node/api",
	}
	// present are the packages the node is split into so far: each must exist, so a
	// rename or a merge back cannot make the rules above skip it silently.
	present = []string{
		"node/api", "node/probe", "node/publish", "node/ingress", "node/reconcile", "node/self",
		"internal/bucket", "node/httpapi",
	}
	// above are the packages no subsystem may depend on.
	above = []string{"node", "node/httpapi", "node/cmd/scafo-node", "node/client"}
	// httpFree are the subsystems that know nothing of HTTP (not net/http, even
	// transitively).
	httpFree = map[string]struct{}{"node/ingress": {}}
	// clientForbidden are what the command-line client must not pull in.
	clientForbidden = []string{
		"github.com/go-chi/chi", "github.com/prometheus/", "github.com/caddyserver/certmagic",
		"github.com/minio/minio-go", mod + "node/store", mod + "node/fleetcerts",
	}
)

// deps maps every package of the module to its transitive dependencies.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}} {{join .Deps " "}}`, mod+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	return m
}

// under reports whether pkg is p or a package below it.
func under(pkg, p string) bool {
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

func TestImportDirection(t *testing.T) {
	all := deps(t)
	for _, p := range present {
		if _, ok := all[mod+p]; !ok {
			t.Errorf("%s does not exist: the node's subsystem packages are %v", p, present)
		}
	}
	var pkgs []string
	for p := range all {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p, mod)
		subsystem := slices.ContainsFunc(subsystems, func(sub string) bool { return under(rel, sub) })
		_, noHTTP := httpFree[rel]
		for _, d := range all[p] {
			drel, ours := strings.CutPrefix(d, mod)
			switch {
			case ours && subsystem && slices.ContainsFunc(above, func(a string) bool { return drel == a || (a != "node" && under(drel, a)) }):
				t.Errorf("%s depends on %s: a subsystem never imports the layers above it", rel, drel)
			case ours && under(rel, "node/api") && drel != "render/routing" && !under(drel, "node/api"):
				t.Errorf("%s depends on %s: node/api imports only render/routing and the standard library", rel, drel)
			case under(rel, "node/client") && (d == mod+"node" || slices.ContainsFunc(clientForbidden, func(f string) bool { return strings.HasPrefix(d, f) })):
				t.Errorf("%s depends on %s: the command-line client depends on none of the server's packages", rel, d)
			// The HTTP layer reads requests (a poll's report headers included) and hands
			// the subsystems values: node/ingress never sees an http.Header.
			case noHTTP && d == "net/http":
				t.Errorf("%s depends on net/http: the HTTP layer (node/httpapi) parses what it hands it", rel)
			case under(rel, "node/httpapi") && d == mod+"node":
				t.Errorf("%s depends on the root node package: httpapi sits below the composition root", rel)
			}
		}
	}
}
