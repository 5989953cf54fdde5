package scafo

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/scafo/ingress/node/storageclient"
	"github.com/scafo/ingress/render/routing"
)

// testIssuer is the issuer directory the permission tests store certificates under.
const testIssuer = "acme-v02.api.letsencrypt.org-directory"

// inHandshake is ctx as CertMagic passes it to the permission during a handshake (the
// ClientHelloInfo under certmagic.ClientHelloInfoCtxKey); a renewal of a certificate
// CertMagic holds asks with a context of its own, without one.
func inHandshake(ctx context.Context) context.Context {
	return context.WithValue(ctx, certmagic.ClientHelloInfoCtxKey, &tls.ClientHelloInfo{})
}

// storeCert stores a self-signed certificate for name, valid from nb to na, where
// CertMagic keeps it (certificates/<issuer>/<name>/<name>.crt).
func storeCert(t testing.TB, st certmagic.Storage, name string, nb, na time.Time) {
	t.Helper()
	if err := st.Store(context.Background(), "certificates/"+testIssuer+"/"+name+"/"+name+".crt", certPEM(t, name, nb, na)); err != nil {
		t.Fatal(err)
	}
}

func certPEM(t testing.TB, name string, nb, na time.Time) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(nb.UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name}, NotBefore: nb, NotAfter: na}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// renewalDoc: the application "shop" with shop1…shop12, "blog" with blog1.
func renewalDoc() *routing.Document {
	d := &routing.Document{V: 1}
	for i := 1; i <= 12; i++ {
		d.Routes = append(d.Routes, routing.Route{Host: fmt.Sprintf("shop%d.example.org", i), Application: "shop", Upstreams: ups("10.0.0.1:1")})
	}
	d.Routes = append(d.Routes, routing.Route{Host: "blog1.example.org", Application: "blog", Upstreams: ups("10.0.0.1:1")})
	d.Seal()
	return d
}

// TestARenewalThatDoesNotLandGetsTheRetryDelayAndTheShare (issue 39, item 2): CertMagic
// renews an on-demand certificate from the handshake, and asks the permission first,
// from the background (no ClientHelloInfo). A renewal used to be approved whatever it
// cost, since the name held a certificate: a name whose renewal kept failing (DNS moved
// away) got an order per minute or so from anonymous handshakes. Now a renewal is
// counted like a name with no certificate: the same retry delay (10, 20, 40 min), the
// same application share; the loads at each handshake (with a ClientHelloInfo, the
// certificate still valid) stay free, so the name is served meanwhile; a renewal that
// lands starts the name over.
func TestARenewalThatDoesNotLandGetsTheRetryDelayAndTheShare(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, _ := docPermission(t, renewalDoc(), 0, 0, &now) // 100 an hour, 10 a share
	st := perm.storage
	// Every shop name holds a certificate 70 days into its 90: due for renewal, valid.
	for i := 1; i <= 12; i++ {
		storeCert(t, st, fmt.Sprintf("shop%d.example.org", i), now.Add(-70*24*time.Hour), now.Add(20*24*time.Hour))
	}
	hs, bg := inHandshake(context.Background()), context.Background()

	// One name, CertMagic's calls for one handshake every 30 s for 50 minutes: the load
	// (free, never refused: the certificate is valid) and the renewal that follows it.
	renewals := 0
	for range 100 {
		now = now.Add(30 * time.Second)
		if err := perm.CertificateAllowed(hs, "shop1.example.org"); err != nil {
			t.Fatalf("loading a valid certificate at a handshake at %s: %v", now.Format(time.TimeOnly), err)
		}
		if perm.CertificateAllowed(bg, "shop1.example.org") == nil {
			renewals++
		}
	}
	if renewals != 3 { // at 04:00:30, 04:10:30, 04:30:30: like a name with no certificate
		t.Fatalf("a failing renewal asked for every 30 s for 50 min: %d approvals, want 3 (was 100)", renewals)
	}
	err := perm.CertificateAllowed(bg, "shop1.example.org")
	if !errors.Is(err, caddytls.ErrPermissionDenied) || !strings.Contains(err.Error(), "no renewed certificate") {
		t.Fatalf("a renewal within its retry delay: %v, want refused saying it has not landed", err)
	}

	// The application's share: its other eleven names' renewals, each asked once, get
	// what is left of its 10; blog's first name is still approved.
	approved := 0
	for i := 2; i <= 12; i++ {
		if perm.CertificateAllowed(bg, fmt.Sprintf("shop%d.example.org", i)) == nil {
			approved++
		}
	}
	if approved != 10-3 {
		t.Fatalf("shop's other renewals within the hour: %d approved, want %d (its share of 10 less shop1's 3)", approved, 10-3)
	}
	err = perm.CertificateAllowed(bg, "shop12.example.org")
	if !errors.Is(err, caddytls.ErrPermissionDenied) || !strings.Contains(err.Error(), `application "shop"'s share`) {
		t.Fatalf("a renewal past the share: %v, want refused naming shop's share", err)
	}
	if err := perm.CertificateAllowed(hs, "blog1.example.org"); err != nil {
		t.Fatalf("another application's first name: %v", err)
	}

	// A renewal that lands resets the name: shop1's renewed certificate (due again at
	// once, say the CA issues short ones) is renewed at its next ask, not 40 min after
	// its last approval. The storage's answer is remembered for heldFor.
	storeCert(t, st, "shop1.example.org", now, now.Add(10*24*time.Hour))
	now = now.Add(heldFor)
	perm.mu.Lock()
	perm.byApp = nil // the share spent by the asks above is not what is tested here
	perm.spent = nil
	perm.mu.Unlock()
	if err := perm.CertificateAllowed(bg, "shop1.example.org"); err != nil {
		t.Fatalf("a renewal after the last one landed: %v, want approved (the retry delay starts over)", err)
	}
	err = perm.CertificateAllowed(bg, "shop1.example.org")
	if !errors.Is(err, caddytls.ErrPermissionDenied) || !strings.Contains(err.Error(), "the next approval for this name in 10m0s") {
		t.Fatalf("once more at once: %v, want refused for the first delay (10m) again", err)
	}
}

// An expired certificate: CertMagic asks twice in one handshake (to load it, then to
// renew it, both with the ClientHelloInfo), and the approval covers both, once; the
// next handshakes within the retry delay are refused (an expired certificate serves no
// one), and one retry delay later the pair is approved again. Before, an expired
// certificate's renewal was approved at every handshake.
func TestAnExpiredCertificateIsRenewedOnceARetryDelay(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, _ := docPermission(t, renewalDoc(), 0, 0, &now)
	storeCert(t, perm.storage, "shop1.example.org", now.Add(-91*24*time.Hour), now.Add(-time.Hour))
	hs := inHandshake(context.Background())
	for i, want := range []bool{true, true, false, false} { // load, renew; then a handshake's renewal, its load
		err := perm.CertificateAllowed(hs, "shop1.example.org")
		if (err == nil) != want {
			t.Fatalf("call %d in the first minute: %v, want approved %v", i+1, err, want)
		}
	}
	now = now.Add(nameRetry)
	for i := range 2 {
		if err := perm.CertificateAllowed(hs, "shop1.example.org"); err != nil {
			t.Fatalf("call %d a retry delay later: %v", i+1, err)
		}
	}
	if err := perm.CertificateAllowed(hs, "shop1.example.org"); err == nil {
		t.Fatal("a third call after the retry delay approved: the follow-up is one call")
	}
	perm.mu.Lock()
	spent := len(perm.spent)
	perm.mu.Unlock()
	if spent != 2 {
		t.Fatalf("%d approvals counted, want 2 (one per load-and-renew pair)", spent)
	}
}

// countingTransport counts the requests that reach the node.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHandshakesForANameWithNoCertificateReadTheStorageOnceAMinute (issue 39, item 3):
// for a document name with no certificate, every anonymous ClientHello made the
// permission list the whole certificates/ namespace through the node (~100 ms of node
// CPU each at 1 000 certificates). Through a real node holding 300 certificates: 600
// handshakes over 5 minutes for such a name read the storage once a minute (the
// issuers' listing and the certificate: two requests), and once more after its one
// approval; 600 for a name the document does not name reach the node never.
func TestHandshakesForANameWithNoCertificateReadTheStorageOnceAMinute(t *testing.T) {
	n := startNode(t, "vps-a", t.TempDir())
	n.waitFirstPass()
	ct := &countingTransport{}
	cl, err := storageclient.New(n.url, testIngressToken, storageclient.Options{HTTPClient: &http.Client{Transport: ct}})
	if err != nil {
		t.Fatal(err)
	}
	st := NewSplitStorage(cl, &certmagic.FileStorage{Path: t.TempDir()})
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	for i := range 300 {
		name := fmt.Sprintf("other%d.example.org", i)
		if err := st.Store(t.Context(), "certificates/"+testIssuer+"/"+name+"/"+name+".crt", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	core, _ := observer.New(zap.DebugLevel)
	p := &Poller{}
	p.cur.Store(NewTable(renewalDoc()))
	perm := &Permission{app: &App{poller: p}, storage: st, logger: zap.New(core), now: func() time.Time { return now }}
	ct.n.Store(0)

	hs := inHandshake(t.Context())
	start := time.Now()
	for range 600 {
		now = now.Add(500 * time.Millisecond)
		perm.CertificateAllowed(hs, "shop1.example.org")
		perm.CertificateAllowed(hs, "unknown.example.org")
	}
	took := time.Since(start)
	// 5 minutes: the issuers listed and the certificate read at the first handshake,
	// again after its one approval (an order may land, maybe under a new issuer), and
	// once a minute after.
	if got := ct.n.Load(); got > 2+2+2*4 {
		t.Fatalf("1 200 handshakes (600 for a document name with no certificate) over 5 minutes: %d requests to the node, want at most 12", got)
	}
	t.Logf("600 handshakes for a document name with no certificate, 600 for an unknown one, over 5 min of clock: %d requests to the node, %s", ct.n.Load(), took)
}

// TestTheStorageThatCannotSayRefusesAndCountsNothing (issue 39, item 4): with no node
// answering, the permission used to approve every document name "unbudgeted", and so
// did it while the node refused some of this address's requests (a local tenant holding
// the per-source connection cap), so orders went out uncounted whenever the lock got
// through. Now a name the storage cannot say anything of is refused and nothing is
// counted; a name whose certificate the storage's cache held is still approved (a Caddy
// restarted in a node outage loads it from there); once the storage answers, the budget
// is whole.
func TestTheStorageThatCannotSayRefusesAndCountsNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // no node there
	cl, err := storageclient.New(dead, testIngressToken, storageclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	cache := &certmagic.FileStorage{Path: t.TempDir()}
	storeCert(t, cache, "shop1.example.org", now.Add(-24*time.Hour), now.Add(89*24*time.Hour)) // held before the outage
	outage := NewSplitStorage(cl, &certmagic.FileStorage{Path: t.TempDir()}).WithCache(cache)

	perm, logs := docPermission(t, renewalDoc(), 1, time.Hour, &now)
	up := perm.storage
	perm.storage = outage
	hs := inHandshake(t.Context())
	if err := perm.CertificateAllowed(hs, "shop1.example.org"); err != nil {
		t.Fatalf("a name whose certificate the cache holds, no node answering: %v, want approved", err)
	}
	for _, name := range []string{"shop2.example.org", "shop3.example.org", "blog1.example.org"} {
		err := perm.CertificateAllowed(hs, name)
		if !errors.Is(err, caddytls.ErrPermissionDenied) || !strings.Contains(err.Error(), "storage cannot say") {
			t.Fatalf("%s, no node answering: %v, want refused saying the storage cannot say", name, err)
		}
	}
	if got := len(logs.FilterMessage("on-demand certificate refused").All()); got != 3 {
		t.Errorf("%d refusals logged, want 3: %v", got, logs.All())
	}
	perm.storage = up
	now = now.Add(errorFor) // the error is remembered that long
	if err := perm.CertificateAllowed(hs, "shop2.example.org"); err != nil {
		t.Fatalf("the first name once the storage answers (budget 1): %v, want approved: nothing was counted", err)
	}
}

// dueIssuer issues, the first time, a certificate already in its renewal window (70
// days into 90) and fails every later order (a renewal whose validation fails: DNS
// moved away), recording each order.
type dueIssuer struct {
	orders atomic.Int64
}

func (d *dueIssuer) Issue(_ context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	if d.orders.Add(1) > 1 {
		return nil, certmagic.ErrNoRetry{Err: errors.New("validation failed: the name's DNS points elsewhere")}
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), DNSNames: csr.DNSNames, NotBefore: now.Add(-70 * 24 * time.Hour), NotAfter: now.Add(20 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, csr.PublicKey, k)
	if err != nil {
		return nil, err
	}
	return &certmagic.IssuedCertificate{Certificate: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func (*dueIssuer) IssuerKey() string { return "due-test-issuer" }

// Through CertMagic's own on-demand code (v0.25.6: GetCertificate, its handshake
// maintenance and background renewal), the permission as its DecisionFunc: a name whose
// certificate is due and whose renewal fails, handshaked 20 times, is served its valid
// certificate at every handshake and ordered twice (its first certificate, one renewal);
// the renewals CertMagic asks for in between are refused. Before, every handshake that
// found no renewal in flight was an order (the issue's "an order a minute or so").
func TestCertMagicRenewingAFailingNameOrdersOnceARetryDelay(t *testing.T) {
	d := renewalDoc()
	p := &Poller{}
	p.cur.Store(NewTable(d))
	st := &certmagic.FileStorage{Path: t.TempDir()}
	perm := &Permission{app: &App{poller: p}, storage: st, logger: zap.NewNop()} // the defaults, the real clock
	decided := make(chan bool, 100)                                              // the background renewals' answers
	// A background renewal unblocks CertMagic's waiters on the name, then logs its end:
	// refused ("certificate should not be obtained") or failed ("renewing and reloading
	// certificate"), both at error level (certmagic v0.25.6, handshake.go).
	ended := make(chan struct{}, 100)
	renewalEnds := zapcore.RegisterHooks(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.ErrorLevel),
		func(e zapcore.Entry) error {
			if e.Message == "certificate should not be obtained" || e.Message == "renewing and reloading certificate" {
				ended <- struct{}{}
			}
			return nil
		})
	iss := &dueIssuer{}
	cache := certmagic.NewCache(certmagic.CacheOptions{GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return nil, errors.New("none") }, Logger: zap.NewNop()})
	t.Cleanup(cache.Stop)
	cfg := certmagic.New(cache, certmagic.Config{
		Storage:    st,
		Logger:     zap.New(renewalEnds),
		DisableARI: true,
		OnDemand: &certmagic.OnDemandConfig{DecisionFunc: func(ctx context.Context, name string) error {
			err := perm.CertificateAllowed(ctx, name)
			if _, hs := ctx.Value(certmagic.ClientHelloInfoCtxKey).(*tls.ClientHelloInfo); !hs {
				decided <- err == nil
			}
			return err
		}},
		Issuers: []certmagic.Issuer{iss},
	})
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	for i := range 20 {
		c, err := cfg.GetCertificate(&tls.ClientHelloInfo{ServerName: "shop1.example.org", Conn: c1})
		if err != nil || c == nil || c.Leaf == nil {
			t.Fatalf("handshake %d: %v, want the valid certificate served", i+1, err)
		}
		// The renewal CertMagic starts in the background: wait for its answer, and for
		// it to end (refused, or its order failed) before the next handshake.
		select {
		case <-decided:
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatalf("handshake %d: the background renewal never ended", i+1)
			}
		case <-time.After(2 * time.Second):
			t.Logf("handshake %d: no renewal asked (one in flight)", i+1)
		}
	}
	if got := iss.orders.Load(); got != 2 {
		t.Fatalf("20 handshakes for a name whose renewal fails: %d orders, want 2 (its certificate, one renewal)", got)
	}
}
