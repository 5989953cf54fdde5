package render

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// fleetCertsWith returns a copy of fc (nil: a new set on entry points eps) where name is
// a fleet-issued name, with a certificate when cert is set (a new one each call: a
// renewal), without one (issuance pending) otherwise. The PEM stand-in has newlines and
// quotes, which the encoder escapes.
func fleetCertsWith(fc *FleetCerts, name string, cert bool, serial int) *FleetCerts {
	out := fleetCertsWithout(fc, name)
	out.Managed[name] = true
	if cert {
		out.Certificates = append(out.Certificates, Certificate{Names: []string{name},
			CertFile: fmt.Sprintf("-----BEGIN CERTIFICATE-----\n%s \"%d\"\n-----END CERTIFICATE-----\n", name, serial),
			KeyFile:  fmt.Sprintf("-----BEGIN EC PRIVATE KEY-----\n%s %d\n-----END EC PRIVATE KEY-----\n", name, serial)})
	}
	return out
}

// fleetCertsWithout returns a copy of fc without name (neither managed nor certified).
func fleetCertsWithout(fc *FleetCerts, name string) *FleetCerts {
	out := &FleetCerts{Managed: map[string]bool{}}
	if fc != nil {
		out.HTTPEntryPoints = fc.HTTPEntryPoints
		for n := range fc.Managed {
			out.Managed[n] = true
		}
		for _, c := range fc.Certificates {
			if !slices.Contains(c.Names, name) {
				out.Certificates = append(out.Certificates, c)
			}
		}
	}
	delete(out.Managed, name)
	return out
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func excerpt(b []byte, at int) string {
	lo, hi := max(at-120, 0), min(at+120, len(b))
	return string(b[lo:hi])
}

// TestAutomaticIntervalStepRendersNoFragmentAgain: the automatic health-check interval
// depends on the number of checks in the whole output, so one application gaining or
// losing an upstream can move every check's interval (here 5s ↔ 6s around 1 000 checked
// leaves). The bytes still equal the full render's, and only that application's
// fragment is rendered again: the others carry a placeholder the assembler fills.
func TestAutomaticIntervalStepRendersNoFragmentAgain(t *testing.T) {
	st := fleet.GenerateState(1000, 0) // 1 000 two-upstream applications + 2 API leaves
	opt := fleet.GenerateOptions()
	inc := mustIncremental(t, Options{})
	render := func() []byte {
		t.Helper()
		doc, _ := fleet.Derive(st, opt)
		want := mustTraefik(t, doc, Options{})
		got, err := rendered(inc, Request{Doc: doc})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("incremental render differs from the full render at byte %d", firstDiff(got, want))
		}
		return got
	}
	first := render()
	if !bytes.Contains(first, []byte(`"interval":"6s"`)) {
		t.Fatal("1 002 checked leaves: want the 6s interval")
	}
	before := inc.cached()
	// Three applications lose their second upstream: 999 checked leaves, 5s.
	for _, a := range []string{"app-00001", "app-00002", "app-00003"} {
		for i := range st.Nodes {
			if inst, ok := st.Nodes[i].Instances[a]; ok && st.Nodes[i].Name != "vps-b" {
				inst.Ready = false
				st.Nodes[i].Instances[a] = inst
			}
		}
	}
	second := render()
	if !bytes.Contains(second, []byte(`"interval":"5s"`)) || bytes.Contains(second, []byte(`"interval":"6s"`)) {
		t.Fatal("999 checked leaves: want every check at 5s")
	}
	if n := inc.cached() - before; n > 3 {
		t.Errorf("the interval step rendered %d fragments again, want only the 3 changed applications", n)
	}
}

// TestIncrementalCacheKeepsOnlyRecentVariants pins the cache bound on both sweep paths:
// an application whose port moves every pass keeps exactly the variants of the last
// keepPasses renders (every slot used: only the slots holding several variants are
// swept), and an application that leaves the fleet is dropped keepPasses renders later
// (a slot unused: the whole cache is swept).
func TestIncrementalCacheKeepsOnlyRecentVariants(t *testing.T) {
	st := fleet.GenerateState(50, 20)
	opt := fleet.GenerateOptions()
	inc := mustIncremental(t, Options{})
	render := func() {
		t.Helper()
		doc, _ := fleet.Derive(st, opt)
		if _, err := rendered(inc, Request{Doc: doc}); err != nil {
			t.Fatal(err)
		}
	}
	render()
	base := inc.cached()
	for pass := 1; pass <= 3*keepPasses; pass++ {
		st.Nodes[1].Instances["app-00004"] = fleet.Instance{Port: 30000 + pass, Ready: true}
		render()
		// The first render (pass 0) and each edited pass left a variant; the sweep
		// keeps those of the last keepPasses renders.
		if got, want := inc.cached()-base, min(pass, keepPasses-1); got != want {
			t.Fatalf("pass %d: %d variants beyond one per fragment, want %d", pass, got, want)
		}
	}
	// app-00007 leaves the fleet (its instances too).
	i := slices.IndexFunc(st.Apps, func(a fleet.App) bool { return a.Name == "app-00007" })
	st.Apps = slices.Delete(st.Apps, i, i+1)
	for pass := 1; pass <= keepPasses+1; pass++ {
		render()
		inc.mu.Lock()
		_, held := inc.apps["app-00007"]
		inc.mu.Unlock()
		if want := pass < keepPasses; held != want {
			t.Fatalf("pass %d after removal: slot held %v, want %v", pass, held, want)
		}
	}
}

// rendered is inc.Render(req) in one slice, as the full render returns it.
func rendered(inc *Incremental, req Request) ([]byte, error) {
	b, err := inc.Render(req)
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
