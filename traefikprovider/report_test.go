package traefikprovider

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every poll names the ingress and its kind; once a configuration was handed to
// Traefik, and AppliedDelay has passed, the polls report its serial, epoch and
// revision; not before.
func TestPluginReportsWhatItAppliedOnItsPolls(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		const epoch = "0123456789abcdef"
		first := routerConfig("shop.example.com", "http://10.83.0.1:24417")
		node := newFakeNode(t, first)
		node.SetBodySerial(first, 7, epoch)
		cfg := testConfig(node.URL())
		cfg.Name = "edge-1"
		cfg.AppliedDelay = "300ms"
		h := start(t, cfg)
		if got := h.next(t, wait); got != first {
			t.Fatalf("emitted %s", got)
		}
		node.WaitFor(t, "a poll reporting serial 7", wait, func(n *fakeNode) bool {
			return n.Reqs[len(n.Reqs)-1].AppliedSerial == "7"
		})
		reqs := node.Requests()
		if r := reqs[0]; r.Ingress != "edge-1" || r.Kind != "plugin" || r.AppliedSerial != "" || r.AppliedRevision != "" {
			t.Errorf("first poll reports %+v, want edge-1, plugin, nothing applied", r)
		}
		r := reqs[len(reqs)-1]
		if r.AppliedEpoch != epoch || r.AppliedRevision != revisionOf(first) {
			t.Errorf("poll after the emit reports serial %q epoch %q revision %q, want 7 %s %s", r.AppliedSerial, r.AppliedEpoch, r.AppliedRevision, epoch, revisionOf(first))
		}
		// Measured from the first poll's arrival at the node, which comes before the emit
		// (the plugin hands over what that poll answered): a slow test cannot shorten it.
		if gap := r.At.Sub(reqs[0].At); gap < 300*time.Millisecond {
			t.Errorf("the poll reporting it applied came %s after the first poll, want at least appliedDelay (300ms) after the emit", gap)
		}
		// Meanwhile the plugin long-polled (a change in that time arrives at once), for
		// no longer than appliedDelay.
		if w := reqs[1].Wait; len(reqs) < 3 || w == "" || w == "30s" {
			t.Errorf("the poll right after the emit waited %q, want a long-poll shortened to appliedDelay", w)
		}

		// A later serial with the same body (a 304 or the same bytes) is reported too.
		node.WaitFor(t, "a held long-poll", wait, func(n *fakeNode) bool { return n.Waiting == 1 })
		second := routerConfig("shop.example.com", "http://10.83.0.2:24417")
		node.SetBodySerial(second, 9, epoch)
		if got := h.next(t, wait); got != second {
			t.Fatalf("emitted %s", got)
		}
		node.WaitFor(t, "a poll reporting serial 9", wait, func(n *fakeNode) bool {
			last := n.Reqs[len(n.Reqs)-1]
			return last.AppliedSerial == "9" && last.AppliedRevision == revisionOf(second)
		})
	})
}

func readSaved(t *testing.T, path string) savedState {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st savedState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// The state file: written on apply, loaded when no node answers at start, preferred to
// an older configuration a node serves, replaced by a newer one, and by a new body at
// the same serial (a fleet certificate).
func TestPluginKeepsTheLastConfigurationInItsStateFile(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		const epoch = "0123456789abcdef"
		path := filepath.Join(t.TempDir(), "state", "scafo.last.json")
		a := routerConfig("shop.example.com", "http://10.83.0.1:24417")
		node := newFakeNode(t, a)
		node.SetBodySerial(a, 5, epoch)
		cfg := testConfig(node.URL())
		cfg.StateFile = path
		h := start(t, cfg)
		if got := h.next(t, wait); got != a {
			t.Fatalf("emitted %s", got)
		}
		var st savedState
		waitUntil(t, "the state file", func() bool {
			_, err := os.Stat(path)
			return err == nil
		})
		st = readSaved(t, path)
		if st.Serial != 5 || st.Epoch != epoch || string(st.Config) != a || st.Revision != revisionOf(a) {
			t.Fatalf("state file %+v, want serial 5 and the configuration", st)
		}
		h.pp.Stop()
		if leftovers, _ := filepath.Glob(path + ".tmp-*"); len(leftovers) > 0 {
			t.Errorf("temporary files left: %v", leftovers)
		}

		// No node answers: the saved configuration is emitted.
		cfg2 := testConfig(closedURL(t), closedURL(t))
		cfg2.StateFile = path
		h2 := start(t, cfg2)
		if got := h2.next(t, wait); got != a {
			t.Fatalf("with no node answering, emitted %s, want the saved configuration", got)
		}
		h2.pp.Stop()

		// A node behind the file (serial 3): the saved one is emitted, the older one
		// is not, and the file keeps serial 5. Then the node moves past it.
		old := routerConfig("shop.example.com", "http://10.83.0.9:24417")
		behind := newFakeNode(t, old)
		behind.SetBodySerial(old, 3, epoch)
		cfg3 := testConfig(behind.URL())
		cfg3.StateFile = path
		h3 := start(t, cfg3)
		if got := h3.next(t, wait); got != a {
			t.Fatalf("with a node behind the file, emitted %s, want the saved configuration", got)
		}
		behind.WaitFor(t, "a long-poll past both", wait, func(n *fakeNode) bool { return n.Waiting == 1 })
		h3.none(t)
		if st := readSaved(t, path); st.Serial != 5 {
			t.Errorf("the file was replaced by an older configuration: serial %d", st.Serial)
		}
		c := routerConfig("shop.example.com", "http://10.83.0.3:24417")
		behind.SetBodySerial(c, 6, epoch)
		if got := h3.next(t, wait); got != c {
			t.Fatalf("emitted %s, want the newer configuration", got)
		}
		waitUntil(t, "the file at serial 6", func() bool { return readSaved(t, path).Serial == 6 })

		// A fleet certificate is issued (or renewed) without a serial bump: the body
		// changes at serial 6. It is applied and replaces the file, so a Traefik
		// restarted with every node down serves the certificate, not the configuration
		// from before it. The file then holds a private key: mode 0600.
		cert := withCertificate(t, c, "-----BEGIN CERTIFICATE-----\nMIIBfleet\n-----END CERTIFICATE-----\n",
			"-----BEGIN EC PRIVATE KEY-----\nMHcfleet\n-----END EC PRIVATE KEY-----\n")
		behind.SetBodySerial(cert, 6, epoch)
		if got := h3.next(t, wait); got != cert {
			t.Fatalf("emitted %s, want the configuration with the certificate", got)
		}
		waitUntil(t, "the file to hold the certificate", func() bool { return string(readSaved(t, path).Config) == cert })
		if st := readSaved(t, path); st.Serial != 6 || st.Key != etagOf(cert) {
			t.Errorf("state file serial %d key %s, want 6 and %s", st.Serial, st.Key, etagOf(cert))
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("state file holding a private key: %v, mode %v; want 0600", err, fi.Mode().Perm())
		}
	})
}

// withCertificate is body with a tls section carrying one certificate, inline PEM, the
// way the node renders fleet certificates.
func withCertificate(t *testing.T, body, certPEM, keyPEM string) string {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(body), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["tls"] = map[string]any{"certificates": []any{map[string]any{"certFile": certPEM, "keyFile": keyPEM}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A corrupt state file is ignored with a warning, never emitted.
func TestPluginIgnoresACorruptStateFile(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		path := filepath.Join(t.TempDir(), "scafo.last.json")
		if err := os.WriteFile(path, []byte(`{"v":1,"key":"\"x\"","config":[1,2`), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(closedURL(t))
		cfg.StateFile = path
		cfg.PollInterval = "50ms"
		h := start(t, cfg)
		waitUntil(t, "the warning", func() bool { return strings.Contains(h.logs.String(), "ignoring the state file") })
		// Two failed polls logged: the first one's handling (where a saved configuration
		// would be emitted, no node answering) is over.
		waitUntil(t, "two failed polls", func() bool { return h.logs.count("refused") >= 2 })
		h.none(t)
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
