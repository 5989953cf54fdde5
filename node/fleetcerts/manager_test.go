package fleetcerts

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
	"github.com/scafo/ingress/render/routing"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// startedManager is New(opt) with the test's log, by default apps.example.com and a CA
// nothing answers (https://127.0.0.1:1), started (its challenge port unreachable too)
// and closed at the test's end.
func startedManager(t *testing.T, opt Options) *Manager {
	t.Helper()
	if opt.CA == "" {
		opt.CA = "https://127.0.0.1:1/dir"
	}
	if opt.PlatformDomains == nil {
		opt.PlatformDomains = []string{"apps.example.com"}
	}
	opt.Log = testLogger(t)
	m, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	m.Start(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1})
	t.Cleanup(m.Close)
	return m
}

func docWith(hosts ...string) *routing.Document {
	d := &routing.Document{V: routing.Version}
	for _, h := range hosts {
		d.Routes = append(d.Routes, routing.Route{Host: h, Application: "app"})
	}
	return d
}

func stateOf(m *Manager, name string) api.CertName {
	for _, s := range m.Status() {
		if s.Name == name {
			return s
		}
	}
	return api.CertName{}
}

// TestTwoManagersOnOneStoreIssueANameOnceAndEitherAnswersTheChallenge: two managers on
// one storage, each behind its own HTTP server. Pebble (validation on) resolves the
// name to the server of the manager that does NOT issue it (B: a platform budget of 0
// keeps B from starting an order, so A issues), so the challenge is answered from the
// store by the other node; one certificate is issued, B loads it from the store, and
// both hold it (same serial). Then the name leaves the document and both drop it.
//
// In one process CertMagic also keeps challenges in a process-wide memory, so B may
// answer from there rather than from the store: the cross-process proof (separate
// node processes, the challenge only in the store) is e2e TestFleetCertificates*.
func TestTwoManagersOnOneStoreIssueANameOnceAndEitherAnswersTheChallenge(t *testing.T) {
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	// Two challenge servers on two loopback addresses, one port (Pebble has one
	// httpPort for every name).
	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lnA.Addr().(*net.TCPAddr).Port
	lnB, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		lnA.Close()
		t.Skipf("127.0.0.2:%d: %v", port, err)
	}
	p := pebbletest.Start(t, pebbletest.Config{HTTPPort: port})

	var served [2]atomic.Int64
	mk := func(i int, ln net.Listener, budget int) *Manager {
		m, err := New(Options{
			Storage: storage, CA: p.Directory, Roots: p.CARoots, Email: "ops@example.com",
			RenewCheckInterval: time.Minute, PlatformDomains: []string{"apps.example.com"},
			PlatformBudget: budget, Log: testLogger(t).With("node", i), Poll: time.Hour, // stepped by the test
		})
		if err != nil {
			t.Fatal(err)
		}
		startServing(t, m, ln, &served[i])
		return m
	}
	a := mk(0, lnA, 10)
	b := mk(1, lnB, 0)
	const name = "shop.apps.example.com"
	p.AddA(t, name, "127.0.0.2")
	b.Sync(docWith(name))
	if s := stateOf(b, name); s.State != StateBacklog {
		t.Fatalf("B with a budget of 0: %+v, want backlog", s)
	}
	a.Sync(docWith(name))

	// Each check steps both loops once: B, which never orders, loads A's certificate
	// from the store at its loop's lookup (every 20 polls).
	nodetest.WaitFor(t, 90*time.Second, "both managers hold a valid certificate", func() bool {
		a.poll()
		b.poll()
		return stateOf(a, name).State == StateValid && stateOf(b, name).State == StateValid
	})
	sa, sb := stateOf(a, name), stateOf(b, name)
	if sa.Serial == "" || sa.Serial != sb.Serial {
		t.Fatalf("serials differ: A %q, B %q", sa.Serial, sb.Serial)
	}
	if issued := p.Issued(); len(issued) != 1 {
		t.Fatalf("Pebble issued %d certificates (%v), want exactly 1", len(issued), issued)
	}
	issuers := 0
	for _, s := range []api.CertName{sa, sb} {
		if s.ObtainedHere {
			issuers++
		}
	}
	if issuers != 1 {
		t.Fatalf("%d managers say they obtained it, want 1: %+v %+v", issuers, sa, sb)
	}
	if served[1].Load() == 0 {
		t.Fatalf("B's server answered no challenge (A %d, B %d): the validation did not go where DNS pointed", served[0].Load(), served[1].Load())
	}
	t.Logf("issued by %s; challenge answers: A %d, B %d", map[bool]string{true: "A", false: "B"}[sa.ObtainedHere], served[0].Load(), served[1].Load())

	// The Set carries the certificate, verifiable against Pebble's root.
	set := a.Current()
	if len(set.FleetCerts.Certificates) != 1 || !set.FleetCerts.Managed[name] {
		t.Fatalf("set: %s", set)
	}
	verifyCert(t, p, set, name, name)
	if b.Current().Fingerprint != set.Fingerprint {
		t.Fatalf("fingerprints differ: %s %s", b.Current().Fingerprint, set.Fingerprint)
	}
	for _, s := range a.Status() {
		if strings.Contains(s.LastError, "PRIVATE KEY") {
			t.Fatal("a status carries key material")
		}
	}

	// The name leaves the document: both stop managing it and the Set drops it.
	a.Sync(docWith())
	b.Sync(docWith())
	for _, m := range []*Manager{a, b} {
		if s := m.Current(); len(s.FleetCerts.Certificates) != 0 || len(s.FleetCerts.Managed) != 0 || len(m.Status()) != 0 {
			t.Fatalf("after removal: %s, status %+v", s, m.Status())
		}
	}
	// The challenge route no longer reads the store for it.
	req := httptest.NewRequest(http.MethodGet, "http://"+name+"/.well-known/acme-challenge/abc", nil)
	rec := httptest.NewRecorder()
	if a.HandleChallenge(rec, req) {
		body, _ := io.ReadAll(rec.Body)
		t.Fatalf("a removed name's challenge was answered: %q", body)
	}
}

// startServing answers m's HTTP-01 challenges on ln (404 for anything else), counting
// the answers in served, and starts m with ln's address as its challenge endpoint.
func startServing(t *testing.T, m *Manager, ln net.Listener, served *atomic.Int64) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.HandleChallenge(w, r) {
			served.Add(1)
			return
		}
		http.NotFound(w, r)
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	m.Start(ln.Addr())
	t.Cleanup(m.Close)
}

// TestAFailingNameAndACorruptStoredOneAreFailedWithoutACertificate: with a CA that
// cannot be reached, and a corrupt certificate in the store for another name (a bad
// write, a hostile store), both names are listed failed, each with its error and a next
// attempt ahead; the Set still manages both (their routers keep tls {}, render's
// TestFleetCertificatesRenderSortedInlineAndByteStable) and delivers no certificate:
// issuance failing never blocks routing. The metrics say failed per name.
func TestAFailingNameAndACorruptStoredOneAreFailedWithoutACertificate(t *testing.T) {
	const ca, apex, corrupt = "https://127.0.0.1:1/dir", "apps.example.com", "shop.apps.example.com"
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	issuer := (&certmagic.ACMEIssuer{CA: ca}).IssuerKey()
	for key, v := range map[string]string{
		certmagic.StorageKeys.SiteCert(issuer, corrupt):       "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n",
		certmagic.StorageKeys.SitePrivateKey(issuer, corrupt): "garbage",
		certmagic.StorageKeys.SiteMeta(issuer, corrupt):       "{not json",
	} {
		if err := storage.Store(t.Context(), key, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	m := startedManager(t, Options{Storage: storage, CA: ca, PlatformDomains: []string{apex}, PlatformBudget: 10, Poll: time.Hour})
	m.Sync(&routing.Document{V: routing.Version, API: &routing.API{Hosts: []string{apex}}, Routes: []routing.Route{{Host: corrupt, Application: "shop"}}})
	stepUntil(t, m, 30*time.Second, "both names failed with a next attempt", func() bool {
		for _, n := range []string{apex, corrupt} {
			if s := stateOf(m, n); s.State != StateFailed || s.LastError == "" || s.NextAttempt == nil || !s.NextAttempt.After(m.now()) {
				return false
			}
		}
		return true
	})
	if set := m.Current(); len(set.FleetCerts.Certificates) != 0 || !set.FleetCerts.Managed[apex] || !set.FleetCerts.Managed[corrupt] {
		t.Fatalf("set %s: want both names managed and no certificate", set)
	}
	got := scrapeMetric(t, "scafo_certificate_state", statusCollector{m})
	for _, n := range []string{apex, corrupt} {
		if want := `scafo_certificate_state{name="` + n + `",state="failed"} 1`; !strings.Contains(got, want) {
			t.Errorf("metrics lack %s:\n%s", want, got)
		}
	}
}
