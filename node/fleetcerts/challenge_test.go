package fleetcerts

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/certstore"
	"github.com/scafo/ingress/node/store/dir"
)

// countingStorage counts every storage operation.
type countingStorage struct {
	certmagic.Storage
	ops atomic.Int64
}

func (c *countingStorage) Load(ctx context.Context, k string) ([]byte, error) {
	c.ops.Add(1)
	return c.Storage.Load(ctx, k)
}
func (c *countingStorage) Exists(ctx context.Context, k string) bool {
	c.ops.Add(1)
	return c.Storage.Exists(ctx, k)
}
func (c *countingStorage) Stat(ctx context.Context, k string) (certmagic.KeyInfo, error) {
	c.ops.Add(1)
	return c.Storage.Stat(ctx, k)
}
func (c *countingStorage) List(ctx context.Context, p string, r bool) ([]string, error) {
	c.ops.Add(1)
	return c.Storage.List(ctx, p, r)
}

// TestChallengeRouteReadsTheStoreOnlyForManagedNamesAndWellFormedTokens: the challenge
// route is anonymous (the CA asks), so what an anonymous client can make it do is
// bounded: a Host the fleet does not issue, a token outside base64url, a method other
// than GET, or a path outside the prefix costs no storage read and answers nothing; a
// managed name with an unknown token costs one read and answers nothing. (A flood's
// reads are bounded by the bucket: TestChallengeIsAnsweredDuringAnAnonymousFlood.)
func TestChallengeRouteReadsTheStoreOnlyForManagedNamesAndWellFormedTokens(t *testing.T) {
	cs := &countingStorage{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	// Budget 0 keeps CertMagic from touching storage for the platform host; the test
	// counts only what requests cause.
	m := startedManager(t, Options{Storage: cs, PlatformBudget: 0})
	m.Sync(docWith("shop.apps.example.com"))
	// Sync reconciles at once and orders nothing (budget 0); whatever CertMagic began on
	// the storage has returned before the count starts.
	if !m.store.idle(10 * time.Second) {
		t.Fatal("the storage still busy 10 s after Sync")
	}
	base := cs.ops.Load()

	try := func(method, target, host string) bool {
		req := httptest.NewRequest(method, target, nil)
		req.Host = host
		return m.HandleChallenge(httptest.NewRecorder(), req)
	}
	for _, tc := range []struct{ method, target, host string }{
		{"GET", "/.well-known/acme-challenge/abcDEF_-123", "other.example.com"}, // not a fleet name
		{"GET", "/.well-known/acme-challenge/abcDEF_-123", "SHOP.apps.example.com.evil"},
		{"GET", "/.well-known/acme-challenge/../../etc/passwd", "shop.apps.example.com"},
		{"GET", "/.well-known/acme-challenge/a%2Fb", "shop.apps.example.com"},
		{"GET", "/.well-known/acme-challenge/", "shop.apps.example.com"},
		{"GET", "/.well-known/acme-challenge/" + strings.Repeat("A", 300), "shop.apps.example.com"},
		{"POST", "/.well-known/acme-challenge/abc", "shop.apps.example.com"},
		{"GET", "/v1/status", "shop.apps.example.com"},
	} {
		if try(tc.method, tc.target, tc.host) {
			t.Errorf("%s %s Host %q was answered", tc.method, tc.target, tc.host)
		}
	}
	if got := cs.ops.Load() - base; got != 0 {
		t.Fatalf("requests for unmanaged names or malformed tokens caused %d storage reads, want 0", got)
	}
	// A managed name (any case, with a port) and a well-formed unknown token: one read
	// per request, nothing answered.
	if try("GET", "/.well-known/acme-challenge/abcDEF_-123", "Shop.Apps.Example.com:80") {
		t.Fatal("an unknown token was answered")
	}
	if got := cs.ops.Load() - base; got < 1 {
		t.Fatalf("a managed name's challenge lookup read nothing (%d): is the store consulted at all?", got)
	}
	if st := m.Status(); len(st) != 1 || st[0].State != StateBacklog {
		t.Fatalf("status %+v", st)
	}
}

// TestBacklogLookupsAreBatched: a node with a large backlog (platform budget 0) looks
// up at most backlogBatch backlogged names in the store per pass, in turn, not every
// name every pass.
func TestBacklogLookupsAreBatched(t *testing.T) {
	cs := &countingStorage{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	m := startedManager(t, Options{Storage: cs, PlatformBudget: 0, Poll: time.Hour})
	var hosts []string
	for i := range 400 {
		hosts = append(hosts, "app"+strconv.Itoa(i)+".apps.example.com")
	}
	m.Sync(docWith(hosts...))
	perName := func() int64 { // storage operations one lookup of a name costs
		before := cs.ops.Load()
		m.cfg.CacheManagedCertificate(context.Background(), "probe.apps.example.com")
		return cs.ops.Load() - before
	}()
	if perName < 1 {
		t.Fatalf("a lookup costs %d storage operations: the count sees nothing", perName)
	}
	before := cs.ops.Load()
	m.loadBacklog()
	if got := cs.ops.Load() - before; got != perName*backlogBatch {
		t.Fatalf("one pass over a backlog of 400 cost %d storage operations, want %d (%d names × %d)", got, perName*backlogBatch, backlogBatch, perName)
	}
	if m.backlogCursor != backlogBatch {
		t.Fatalf("cursor %d after one pass, want %d", m.backlogCursor, backlogBatch)
	}
}

// TestChallengeIsAnsweredDuringAnAnonymousFlood: junk tokens sent faster than the
// store-read bucket (50/s) must not make the node refuse the CA's own validation (on
// every node at once that stops every issuance and renewal of the fleet). A challenge
// stored while the flood runs is answered, from a read that started after the request
// arrived, and the reads stay within the bucket.
func TestChallengeIsAnsweredDuringAnAnonymousFlood(t *testing.T) {
	cs := &countingStorage{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	const host = "shop.apps.example.com"
	flood := make([]string, 20) // 20 clients, all on the one name
	for i := range flood {
		flood[i] = host
	}
	answered, ops, elapsed := challengeFlood(t, cs, []string{host}, flood, 5)
	if answered != 5 {
		t.Errorf("the CA's request during a flood of junk tokens was answered %d times of 5, want every time", answered)
	}
	if limit := int64(100 + 50*elapsed.Seconds() + 1); ops > limit {
		t.Errorf("the flood caused %d storage operations, want at most %d (the bucket)", ops, limit)
	}
}

// challengeFlood runs a manager over cs for hosts, with one client per entry of flood
// sending junk tokens for that name as fast as it can. Once the flood has spent the
// store-read bucket's burst (every store operation of a lookup takes a token first), the
// ordering node (here: the test) stores a challenge for hosts[0] and the CA asks for it
// tries times. It returns how many were answered, and the storage operations and time
// the flood took.
// lookupBurst is the burst of the store-read bucket (New: newTokenBucket(50, 100)).
const lookupBurst = 100

func challengeFlood(t *testing.T, cs *countingStorage, hosts, flood []string, tries int) (answered int, ops int64, elapsed time.Duration) {
	t.Helper()
	m := startedManager(t, Options{Storage: cs, PlatformBudget: 0})
	m.Sync(docWith(hosts...))
	try := func(host, token string) string {
		req := httptest.NewRequest("GET", "/.well-known/acme-challenge/"+token, nil)
		req.Host = host
		rec := httptest.NewRecorder()
		if !m.HandleChallenge(rec, req) {
			return ""
		}
		return rec.Body.String()
	}
	before := cs.ops.Load()
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, h := range flood {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					try(h, "junkJUNKjunk")
				}
			}
		})
	}
	nodetest.WaitFor(t, 30*time.Second, "the flood spending the store-read bucket's burst", func() bool {
		return cs.ops.Load()-before >= lookupBurst
	})
	host := hosts[0]
	key := path.Join("acme", certmagic.StorageKeys.Safe(m.issuer.IssuerKey()), "challenge_tokens", certmagic.StorageKeys.Safe(host)+".json")
	b, _ := json.Marshal(acme.Challenge{Type: "http-01", Token: "GENUINEtoken", KeyAuthorization: "GENUINEtoken.thumbprint",
		Identifier: acme.Identifier{Type: "dns", Value: host}})
	if err := cs.Store(t.Context(), key, b); err != nil {
		t.Fatal(err)
	}
	for range tries {
		if got := try(host, "GENUINEtoken"); got == "GENUINEtoken.thumbprint" {
			answered++
		}
	}
	close(stop)
	wg.Wait()
	return answered, cs.ops.Load() - before, time.Since(start)
}

// TestChallengeIsAnsweredDuringAFloodAcrossManyNames: the per-name coalescing above
// bounds what junk for one name costs, but the store-read bucket (50/s) is shared by
// every name. Before the fix, an anonymous client that sent junk tokens for a thousand
// of the fleet's names (they are public: DNS, CT logs) had a thousand reads waiting for
// the bucket at once; the read the CA's request needed got a token within
// challengeWait about one time in four, so validations failed on every node and
// issuance and renewals stopped. One listing of the pending challenges now serves
// every name a round asks about, and only names with a pending challenge are read.
func TestChallengeIsAnsweredDuringAFloodAcrossManyNames(t *testing.T) {
	// The fleet's own certificate namespace over a real store (a listing there is one
	// store LIST).
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStorage{Storage: certstore.New(st, certstore.Options{Owner: "test"})}
	const names = 1000
	hosts := make([]string, names)
	for i := range hosts {
		hosts[i] = "app" + strconv.Itoa(i) + ".apps.example.com"
	}
	answered, ops, elapsed := challengeFlood(t, cs, hosts, hosts[1:], 4)
	if answered != 4 {
		t.Errorf("the CA's request during a flood of junk for %d other names was answered %d times of 4, want every time", names-1, answered)
	}
	if limit := int64(2 * (100 + 50*elapsed.Seconds() + 1)); ops > limit { // a round may list and read
		t.Errorf("the flood caused %d storage operations, want at most %d", ops, limit)
	}
}
