package storageclient_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io/fs"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/certstore"
	"github.com/scafo/ingress/node/certstore/certstoretest"
	"github.com/scafo/ingress/node/storageclient"
	"github.com/scafo/ingress/node/store"
)

// inProcess is a node built over a store and served in process (httptest over its
// Handler): the storage API needs no loop, only the first pass that makes the node
// ready. Stop closes its server, as a node gone away.
type inProcess struct {
	URL  string
	St   store.Store
	Stop func()
}

// twoNodes builds two nodes over one dir store (one directory opened twice). The
// storage API over S3 is the same code over store.Store: that the backends are equal
// is storetest's.
func twoNodes(t *testing.T) (a, b *inProcess) {
	t.Helper()
	root := t.TempDir()
	build := func(name, address string) *inProcess {
		cfg := testnode.FleetConfig(t, name, address, 40*time.Millisecond, time.Hour, 4*time.Hour)
		cfg.Store.Dir.Path = root
		n := testnode.NewStepped(t, cfg, nil)
		n.Tick()
		hs := httptest.NewServer(n.Srv.Handler())
		t.Cleanup(hs.Close)
		return &inProcess{URL: hs.URL, St: n.St, Stop: hs.Close}
	}
	return build("vps-a", "127.0.0.1"), build("vps-b", "127.0.0.2")
}

// killSwitch is a transport that can be cut, as when the holder's process dies: no
// request of it reaches a node any more.
type killSwitch struct {
	mu       sync.Mutex
	idle     sync.Cond // signalled when inflight drops
	dead     bool
	inflight int
	next     http.RoundTripper
}

func (k *killSwitch) RoundTrip(r *http.Request) (*http.Response, error) {
	k.mu.Lock()
	if k.dead {
		k.mu.Unlock()
		return nil, errors.New("killed")
	}
	k.inflight++
	k.mu.Unlock()
	resp, err := k.next.RoundTrip(r)
	k.mu.Lock()
	k.inflight--
	k.idle.Broadcast()
	k.mu.Unlock()
	return resp, err
}

// kill cuts the transport and waits until the requests it had let through are answered
// (a renewal in flight at the kill has landed, or failed, when it returns).
func (k *killSwitch) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dead = true
	for k.inflight > 0 {
		k.idle.Wait()
	}
}

func newClient(t *testing.T, n *inProcess, opts storageclient.Options) *storageclient.Client {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := storageclient.New(n.URL, testnode.IngressToken, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fastClient() storageclient.Options {
	return storageclient.Options{LockLease: 2 * time.Second, RenewInterval: 300 * time.Millisecond,
		PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond}
}

// TestRefusesBadEndpoints: the client refuses what it cannot use.
func TestRefusesBadEndpoints(t *testing.T) {
	for _, ep := range []string{"", "127.0.0.1:7400", "ftp://h", "http://", "http://h?x=1", "http://u:p@h"} {
		if _, err := storageclient.New(ep, "tok", storageclient.Options{}); err == nil {
			t.Errorf("New(%q) accepted", ep)
		}
	}
	if _, err := storageclient.New("http://127.0.0.1:7400", "", storageclient.Options{}); err == nil {
		t.Error("New with no token accepted")
	}
}

// TestStorageClientAgainstTwoNodes runs the Go client against two nodes over one
// store (their cases, which share the nodes, one after another).
func TestStorageClientAgainstTwoNodes(t *testing.T) {
	t.Parallel()
	na, nb := twoNodes(t)
	t.Run("MutualExclusionAcrossNodes", func(t *testing.T) { clientMutualExclusion(t, na, nb) })
	t.Run("DeadHolderTakenOverAfterLease", func(t *testing.T) { clientDeadHolder(t, na, nb) })
	t.Run("OddKeysAndLargeValues", func(t *testing.T) { clientOddKeysLargeValues(t, na, nb) })
	t.Run("MatchesFileStorage", func(t *testing.T) { clientMatchesFileStorage(t, na, nb) })
	t.Run("OnlyTheOwnerReleases", func(t *testing.T) { clientOnlyOwnerReleases(t, na, nb) })
	t.Run("CertMagicCleanStorage", func(t *testing.T) { clientCertMagicCleanStorage(t, na, nb) })
}

// Goroutines behind two clients, each client on its own node, increment one counter
// under one lock: no update is lost (certstoretest.Locks).
func clientMutualExclusion(t *testing.T, na, nb *inProcess) {
	certstoretest.Locks(t, "mutex/counter", "issue_cert_counter.example.com", 3, 5,
		newClient(t, na, fastClient()), newClient(t, nb, fastClient()))
}

// A holder whose process dies (its transport cut) stops renewing; a client on the other
// node takes the lock once the lease has run out, not before.
func clientDeadHolder(t *testing.T, na, nb *inProcess) {
	ctx := t.Context()
	ks := &killSwitch{next: http.DefaultTransport}
	ks.idle.L = &ks.mu
	opts := fastClient()
	opts.HTTPClient = &http.Client{Transport: ks, Timeout: 5 * time.Second}
	holder := newClient(t, na, opts)
	other := newClient(t, nb, fastClient())
	if err := holder.Lock(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	// Alive, it keeps the lock past its 2s lease: the other node tries all along, a
	// second beyond the lease (the lease is the nodes' wall clock).
	nodetest.Throughout(t, opts.LockLease+time.Second, 100*time.Millisecond, "the live, renewed lock stays with its holder", func() bool {
		ok, err := other.TryLock(ctx, "dead")
		if ok || err != nil {
			t.Logf("the other node's TryLock of a live, renewed lock: %v, %v", ok, err)
		}
		return !ok && err == nil
	})
	died := time.Now()
	ks.kill()
	// The lease the dead holder last wrote, as the store has it (a renewal in flight at
	// the kill has landed: kill waited for it).
	obj, err := na.St.Get(ctx, certstore.LockPrefix+"dead!")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Expires time.Time }
	if err := json.Unmarshal(obj.Value, &rec); err != nil || rec.Expires.IsZero() {
		t.Fatalf("lock object %q: %v", obj.Value, err)
	}
	if err := other.Lock(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	got := time.Now()
	if got.Before(rec.Expires) {
		t.Fatalf("the lock changed hands at %s, before the dead holder's lease ran out at %s", got, rec.Expires)
	}
	if late := got.Sub(rec.Expires); late > 5*time.Second {
		t.Fatalf("the lock changed hands %s after the dead holder's lease ran out", late)
	}
	// A renewal in flight at the kill may land just after it (+2s from the node's now).
	if left := rec.Expires.Sub(died); left > 2500*time.Millisecond {
		t.Fatalf("the dead holder's lease ran %s past the kill, more than the 2s lease", left)
	}
	if err := other.Unlock(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
}

func clientOddKeysLargeValues(t *testing.T, na, nb *inProcess) {
	ctx := t.Context()
	ca, cb := newClient(t, na, storageclient.Options{}), newClient(t, nb, storageclient.Options{})
	big := make([]byte, certstore.DefaultMaxValueSize)
	for i := range big {
		big[i] = byte(i * 7)
	}
	longDomain := strings.Repeat("abcdefghi.", 25) + "com"
	keys := []string{
		"odd/certificates/acme-v02.api.letsencrypt.org-directory/*.example.com/*.example.com.crt",
		"odd/users/ops@example.com/ops.json",
		"odd/a%2Fb", "odd/a%252Fb", "odd/%2e%2e", "odd/?q=1#f", "odd/sp ace", "odd/üñí☃", "odd/~!$&'()+,;=:@",
		"odd/" + longDomain + "/" + longDomain + ".key",
	}
	for _, k := range keys {
		if err := ca.Store(ctx, k, []byte("v:"+k)); err != nil {
			t.Fatalf("Store(%.50q): %v", k, err)
		}
	}
	for _, k := range keys {
		if v, err := cb.Load(ctx, k); err != nil || string(v) != "v:"+k {
			t.Fatalf("Load(%.50q) through the other node = %q, %v", k, v, err)
		}
		if !cb.Exists(ctx, k) {
			t.Fatalf("Exists(%.50q) = false", k)
		}
	}
	got, err := cb.List(ctx, "odd", true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "odd/"+longDomain) || !slices.Contains(got, "odd/a%2Fb") || slices.Contains(got, "odd/a") {
		t.Fatalf("List(odd) = %q", got)
	}
	if err := ca.Store(ctx, "big/chain.pem", big); err != nil {
		t.Fatal(err)
	}
	if v, err := cb.Load(ctx, "big/chain.pem"); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("1 MiB value through the other node: %d bytes, %v", len(v), err)
	}
	ki, err := cb.Stat(ctx, "big/chain.pem")
	if err != nil || ki.Size != int64(len(big)) || !ki.IsTerminal {
		t.Fatalf("Stat = %+v, %v", ki, err)
	}
	if err := ca.Store(ctx, "big/over", append(big, 1)); !errors.Is(err, certstore.ErrValueTooLarge) {
		t.Fatalf("over the limit = %v, want ErrValueTooLarge", err)
	}
	if _, err := cb.Load(ctx, "big/over"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a refused value = %v, want fs.ErrNotExist", err)
	}
	if err := ca.Store(ctx, "../escape", nil); !errors.Is(err, certstore.ErrInvalidKey) {
		t.Fatalf("a traversal key = %v, want ErrInvalidKey", err)
	}
}

// The client on one node and certmagic.FileStorage run the CertMagic storage suite's
// random sequence (certstoretest.MatchesFileStorage), written through one node and read
// through the other: every answer matches (certstore's own run of the suite covers more
// operations; this one proves the HTTP layer keeps the semantics).
func clientMatchesFileStorage(t *testing.T, na, nb *inProcess) {
	certstoretest.MatchesFileStorage(t, newClient(t, na, storageclient.Options{}), newClient(t, nb, storageclient.Options{}),
		certstoretest.Oracle{Seed1: 14, Seed2: 2, Ops: 160, Tops: []string{"oracle"},
			Segs: []string{"a", "b", "a.b", "*", "x@y:z", "%2F", "ü", "c d", "?#"}})
}

// A lock taken through one node is not released, renewed or taken by another owner
// through the other node.
func clientOnlyOwnerReleases(t *testing.T, na, nb *inProcess) {
	ctx := t.Context()
	ca, cb := newClient(t, na, fastClient()), newClient(t, nb, fastClient())
	if err := ca.Lock(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if err := cb.ReleaseLock(ctx, "mine", "guessed-owner"); !errors.Is(err, certstore.ErrNotLockOwner) {
		t.Fatalf("release by another owner = %v, want ErrNotLockOwner", err)
	}
	if _, err := cb.RenewLock(ctx, "mine", "guessed-owner", time.Minute); !errors.Is(err, certstore.ErrLockLost) {
		t.Fatalf("renew by another owner = %v, want ErrLockLost", err)
	}
	var held *certstore.HeldError
	if _, err := cb.AcquireLock(ctx, "mine", "guessed-owner", time.Minute); !errors.As(err, &held) || time.Until(held.Expires) <= 0 {
		t.Fatalf("acquire by another owner = %v, want a HeldError with its expiry", err)
	}
	if err := cb.Unlock(ctx, "mine"); err == nil {
		t.Fatal("Unlock of a lock this client never took succeeded")
	}
	if err := ca.RenewLockLease(ctx, "mine", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := ca.Unlock(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if ok, err := cb.TryLock(ctx, "mine"); !ok || err != nil {
		t.Fatalf("TryLock after release = %v, %v", ok, err)
	}
	if err := cb.Unlock(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
}

// TestStorageClientMovesToAFallbackNode: when the node a client talks to goes away, the
// client carries on through the next one, and a lock it holds keeps being renewed there
// (another client never gets it).
func TestStorageClientMovesToAFallbackNode(t *testing.T) {
	na, nb := twoNodes(t)
	ctx := t.Context()
	opts := fastClient()
	opts.Fallbacks = []string{nb.URL}
	c := newClient(t, na, opts)
	other := newClient(t, nb, fastClient())
	if err := c.Store(ctx, "f/v", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Lock(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	na.Stop()
	if v, err := c.Load(ctx, "f/v"); err != nil || string(v) != "1" {
		t.Fatalf("Load after the first node stopped = %q, %v", v, err)
	}
	// Past the 2s lease: the renewals went through the fallback. The other client tries
	// all along, a second beyond the lease (the nodes' wall clock).
	nodetest.Throughout(t, opts.LockLease+time.Second, 100*time.Millisecond, "the lock kept through the fallback", func() bool {
		ok, err := other.TryLock(ctx, "f")
		if ok || err != nil {
			t.Logf("the lock was lost when its client's node stopped: %v, %v", ok, err)
		}
		return !ok && err == nil
	})
	if err := c.Unlock(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	// No fallback: the error says the store (node) is unavailable.
	alone := newClient(t, na, fastClient())
	if _, err := alone.Load(ctx, "f/v"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Load with every node down = %v, want store.ErrUnavailable", err)
	}
}

// selfSigned returns a PEM certificate for name valid until notAfter.
func selfSigned(t *testing.T, name string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: notAfter.Add(-90 * 24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// CertMagic's own storage maintenance (certmagic.CleanStorage: its lock, non-recursive
// lists of issuers and sites, loads, deletes, the last-clean record) runs through the
// client and removes exactly the expired certificate.
func clientCertMagicCleanStorage(t *testing.T, na, nb *inProcess) {
	ctx := t.Context()
	c := newClient(t, na, fastClient())
	const issuer = "acme-v02.api.letsencrypt.org-directory"
	k := certmagic.StorageKeys
	put := func(domain string, notAfter time.Time) {
		for key, v := range map[string][]byte{
			k.SiteCert(issuer, domain):       selfSigned(t, domain, notAfter),
			k.SitePrivateKey(issuer, domain): []byte("-----BEGIN EC PRIVATE KEY-----\n…"),
			k.SiteMeta(issuer, domain):       []byte(`{"sans":["` + domain + `"]}`),
		} {
			if err := c.Store(ctx, key, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("expired.example.com", time.Now().Add(-48*time.Hour))
	put("*.example.com", time.Now().Add(60*24*time.Hour))
	opts := certmagic.CleanStorageOptions{ExpiredCerts: true, ExpiredCertGracePeriod: 24 * time.Hour, Interval: time.Hour, InstanceID: "vps-a"}
	if err := certmagic.CleanStorage(ctx, c, opts); err != nil {
		t.Fatal(err)
	}
	other := newClient(t, nb, fastClient())
	for _, key := range []string{k.SiteCert(issuer, "expired.example.com"), k.SitePrivateKey(issuer, "expired.example.com"), k.SiteMeta(issuer, "expired.example.com")} {
		if other.Exists(ctx, key) {
			t.Errorf("CleanStorage left the expired %s", key)
		}
	}
	sites, err := other.List(ctx, k.CertsPrefix(issuer), false)
	if err != nil || !slices.Equal(sites, []string{k.CertsSitePrefix(issuer, "*.example.com")}) {
		t.Fatalf("sites after cleaning = %q, %v", sites, err)
	}
	if _, err := other.Load(ctx, "last_clean.json"); err != nil {
		t.Fatalf("no last-clean record: %v", err)
	}
	// Within the interval a second run reads the record and skips; the lock was released.
	if err := certmagic.CleanStorage(ctx, c, opts); err != nil {
		t.Fatal(err)
	}
	if ok, err := other.TryLock(ctx, "storage_clean"); !ok || err != nil {
		t.Fatalf("the cleaning lock was not released: %v, %v", ok, err)
	}
	other.Unlock(ctx, "storage_clean")
}
