package fleetwrite

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// peer is another node's Writer over the same store.
func (f *fixture) peer(t *testing.T, st store.Store) *Writer {
	t.Helper()
	reg, err := OpenRegistry(filepath.Join(t.TempDir(), "instances.json"), 24000, 24009, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Node: "vps-b", APIPort: 7400}, st, &store.Identity{}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func forged() string { return "scafo_" + randomHexN(8) + "_" + randomHexN(32) }

// TestTokenMACKeyIsCreatedOnce: writers racing to create the key agree on one object
// (a conditional create), and the tokens one issues verify on every other.
func TestTokenMACKeyIsCreatedOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	ws := []*Writer{f.w}
	for range 7 {
		ws = append(ws, f.peer(t, f.st))
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.CheckToken(ctx, forged()) }()
	}
	wg.Wait()
	for i, w := range ws {
		it, err := w.IssueToken(ctx, admin, "acme", "shop", []string{"publish"})
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range ws {
			if got := v.CheckToken(ctx, it.Token); got != TokenSigned {
				t.Fatalf("a token issued by writer %d checks %v on writer %d, want TokenSigned (two keys were created)", i, got, j)
			}
		}
	}
}

// TestTokenMACKeyReplacedIsFollowed: a key deleted and created anew by another node is
// picked up by a node holding the old one at its next recheck (at most once per
// macRecheck, driven here by the writer's clock); the old key's tokens are refused
// everywhere from then on (losing the key means reissuing tokens).
func TestTokenMACKeyReplacedIsFollowed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	st := &readLog{Store: f.st}
	a, b := f.peer(t, st), f.peer(t, st)
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	t1, err := a.IssueToken(ctx, admin, "acme", "shop", []string{"publish"})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.CheckToken(ctx, t1.Token); got != TokenSigned {
		t.Fatalf("t1 on b: %v", got)
	}
	// A flood of forged tokens rechecks the key at most once per macRecheck.
	st.take("")
	for range 500 {
		if got := a.CheckToken(ctx, forged()); got != TokenForged {
			t.Fatalf("a forged token: %v", got)
		}
	}
	if r, _ := st.take(TokenMACKey); r != 1 {
		t.Fatalf("500 forged tokens read the key %d times, want 1 (one recheck)", r)
	}
	if err := f.st.Delete(ctx, TokenMACKey, ""); err != nil {
		t.Fatal(err)
	}
	b.mac.cur = nil // b restarts
	t2, err := b.IssueToken(ctx, admin, "acme", "shop", []string{"publish"})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.CheckToken(ctx, t2.Token); got != TokenForged {
		t.Fatalf("t2 on a within macRecheck of the last recheck: %v, want TokenForged (no read)", got)
	}
	now = now.Add(macRecheck)
	if got := a.CheckToken(ctx, t2.Token); got != TokenSigned {
		t.Fatalf("t2 on a after macRecheck: %v, want TokenSigned (the new key followed)", got)
	}
	for name, w := range map[string]*Writer{"a": a, "b": b} {
		if got := w.CheckToken(ctx, t1.Token); got != TokenForged {
			t.Errorf("t1 (the old key's) on %s: %v, want TokenForged", name, got)
		}
	}
	// a issues with the new key (issueKey checks the cached key is the stored one).
	t3, err := a.IssueToken(ctx, admin, "acme", "shop", []string{"publish"})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.CheckToken(ctx, t3.Token); got != TokenSigned {
		t.Errorf("t3 on b: %v, want TokenSigned", got)
	}
}

// TestACorruptTokenMACKeyFallsBack: a corrupt key object is TokenNoKey for every token
// (never TokenForged), read again only after macRetry, and issuing is refused with
// ErrUnavailable; once deleted, the next need creates a new key.
func TestACorruptTokenMACKeyFallsBack(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	it, err := f.w.IssueToken(ctx, admin, "acme", "shop", []string{"publish"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Put(ctx, TokenMACKey, []byte(`{"key":"`+strings.Repeat("a", 63)+`"}`), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	st := &readLog{Store: f.st}
	w := f.peer(t, st)
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return now }
	for _, tok := range []string{it.Token, forged()} {
		if got := w.CheckToken(ctx, tok); got != TokenNoKey {
			t.Fatalf("on a corrupt key: %v, want TokenNoKey", got)
		}
	}
	if !w.TokenMACBroken() {
		t.Error("TokenMACBroken is false on a corrupt key")
	}
	if r, _ := st.take(TokenMACKey); r != 1 {
		t.Errorf("the corrupt key was read %d times within macRetry, want 1", r)
	}
	if _, err := w.IssueToken(ctx, admin, "acme", "shop", []string{"publish"}); err == nil || !strings.Contains(err.Error(), TokenMACKey) {
		t.Errorf("issuing on a corrupt key: %v, want an error naming %s", err, TokenMACKey)
	}
	if err := f.st.Delete(ctx, TokenMACKey, ""); err != nil {
		t.Fatal(err)
	}
	now = now.Add(macRetry)
	if got := w.CheckToken(ctx, it.Token); got != TokenForged {
		t.Errorf("after the corrupt key was deleted: %v, want TokenForged (a new key; the token must be reissued)", got)
	}
	re, err := w.IssueToken(ctx, admin, "acme", "shop", []string{"publish"})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.CheckToken(ctx, re.Token); got != TokenSigned {
		t.Errorf("a token reissued with the new key: %v, want TokenSigned", got)
	}
}

// BenchmarkCheckForgedToken: what refusing a made-up token costs once the key is cached
// (one HMAC-SHA256, no store request).
func BenchmarkCheckForgedToken(b *testing.B) {
	st, err := dir.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	w := New(Config{Node: "vps-a"}, st, &store.Identity{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	w.CheckToken(ctx, forged())
	tok := forged()
	b.ReportAllocs()
	for b.Loop() {
		if w.CheckToken(ctx, tok) != TokenForged {
			b.Fatal("not forged")
		}
	}
}
