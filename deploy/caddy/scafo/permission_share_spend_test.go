package scafo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestTwoFailingNamesCannotLockAnApplicationsNewNameOut (hostile round five): the
// share's doc says a name refused now "is approved at a later handshake, once the
// window slides". An anonymous client handshaking two of shop's names whose orders
// fail (DNS not pointed yet), every 10 s, takes each approval the moment it is due (a
// name is approved again every 10 minutes: 12 an hour against the share of 10); shop's
// new name, handshaked by its visitors once a minute from the second hour, must still
// be approved within the next two hours.
func TestTwoFailingNamesCannotLockAnApplicationsNewNameOut(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, _ := docPermission(t, shareDoc(), 0, 0, &now) // the defaults: 100 an hour, 10 a share
	ctx := context.Background()
	attacker := 0
	for s := 0; s < 3*3600; s += 10 {
		now = now.Add(10 * time.Second)
		for _, name := range []string{"shop1.example.org", "shop2.example.org"} {
			if perm.CertificateAllowed(ctx, name) == nil {
				attacker++ // ordered; the order fails: no certificate lands
			}
		}
		if s >= 3600 && s%60 == 0 && perm.CertificateAllowed(ctx, "shop3.example.org") == nil {
			t.Logf("shop3 approved %s after it appeared (the failing names had %d approvals)", time.Duration(s-3600)*time.Second, attacker)
			return
		}
	}
	t.Fatalf("shop3, handshaked once a minute for two hours, was never approved: two failing names of shop, handshaked every 10 s, took all %d approvals of its share", attacker)
}

// TestSpellingsAndUnknownNamesSpendNoShare: an anonymous client choosing the SNI —
// shop's names in upper case, with a trailing dot, with a port, under the wildcard,
// look-alike suffixes, 20 000 made-up names — is refused by the document, spends
// nothing of shop's share nor of the budget, and leaves no state behind (memory from
// client-chosen names is nil). shop's ten real new names are then all approved.
// (Fails if ApplicationOf folded case: the upper-case spellings would spend shop's
// share.)
func TestSpellingsAndUnknownNamesSpendNoShare(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, _ := docPermission(t, shareDoc(), 0, 0, &now)
	ctx := context.Background()
	var hostile []string
	for i := 1; i <= 30; i++ {
		for _, f := range []string{"SHOP%d.example.org", "shop%d.EXAMPLE.org", "shop%d.example.org.", "shop%d.example.org:443",
			"x.shop%d.example.org", "shop%d.example.org.evil", "shop%d.wild.example.org", "*.shop%d.example.org"} {
			hostile = append(hostile, fmt.Sprintf(f, i))
		}
	}
	hostile = append(hostile, "APPS.example.com", "apps.example.com.", "*.wild.example.org", "wild.example.org", "", ".", "(api)")
	for i := range 20000 {
		hostile = append(hostile, fmt.Sprintf("n%d.example.org", i))
	}
	for _, name := range hostile {
		if err := perm.CertificateAllowed(ctx, name); err == nil {
			t.Fatalf("%q approved", name)
		}
	}
	perm.mu.Lock()
	state := len(perm.spent) + len(perm.byApp) + len(perm.tried)
	perm.mu.Unlock()
	if state != 0 {
		t.Fatalf("refused names left %d entries of state", state)
	}
	for i := 21; i <= 30; i++ {
		if err := perm.CertificateAllowed(ctx, fmt.Sprintf("shop%d.example.org", i)); err != nil {
			t.Fatalf("shop's real name after %d refused spellings: %v", len(hostile), err)
		}
	}
}

// TestConcurrentHandshakesNeverOverspendAShare: 64 handshakes at once for each of
// shop's 30 names (run it with -race): exactly its share is approved, each name at
// most once.
func TestConcurrentHandshakesNeverOverspendAShare(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, _ := docPermission(t, shareDoc(), 0, 0, &now)
	ctx := context.Background()
	var mu sync.Mutex
	approved := map[string]int{}
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				name := fmt.Sprintf("shop%d.example.org", (i+g)%30+1)
				if perm.CertificateAllowed(ctx, name) == nil {
					mu.Lock()
					approved[name]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for name, n := range approved {
		if n != 1 {
			t.Errorf("%s approved %d times at once", name, n)
		}
		total += n
	}
	if total != DefaultShare(DefaultIssuanceBudget) {
		t.Fatalf("%d approvals of shop's names at once, want its share %d", total, DefaultShare(DefaultIssuanceBudget))
	}
}

// TestRetryAfterDoublesUpToTheInterval: 10, 20, 40 minutes, then the interval; an
// interval shorter than nameRetry is the delay; a huge one never overflows.
func TestRetryAfterDoublesUpToTheInterval(t *testing.T) {
	for _, c := range []struct {
		n    int
		iv   time.Duration
		want time.Duration
	}{
		{1, time.Hour, 10 * time.Minute}, {2, time.Hour, 20 * time.Minute}, {3, time.Hour, 40 * time.Minute},
		{4, time.Hour, time.Hour}, {1000, time.Hour, time.Hour},
		{1, time.Minute, time.Minute}, {5, time.Minute, time.Minute},
		{200, time.Duration(1<<63 - 1), time.Duration(1<<63 - 1)},
	} {
		if got := retryAfter(c.n, c.iv); got != c.want {
			t.Errorf("retryAfter(%d, %s) = %s, want %s", c.n, c.iv, got, c.want)
		}
	}
}
