package scafo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// gatedStorage is a FileStorage whose Load of gate waits until release is closed,
// after noting that it started.
type gatedStorage struct {
	*certmagic.FileStorage
	gate     string
	started  chan struct{}
	release  chan struct{}
	loadOnce sync.Once
}

func (g *gatedStorage) Load(ctx context.Context, key string) ([]byte, error) {
	if key == g.gate {
		b, err := g.FileStorage.Load(ctx, key) // what the storage holds when asked
		g.loadOnce.Do(func() {
			close(g.started)
			<-g.release
		})
		return b, err
	}
	return g.FileStorage.Load(ctx, key)
}

// TestAReadOlderThanAForgetIsNotRemembered: an approval forgets what is remembered of
// its name, because its order may land at once. A read of the storage that began
// before that forget (another handshake for the name, in flight) and ends after it
// put its answer, "no certificate", back in the cache for heldFor: for a minute the
// name counted as holding none although the storage held the certificate just
// obtained, so a handshake after CertMagic dropped it from memory went through the
// budget and its retry delay (refused) instead of loading it free.
func TestAReadOlderThanAForgetIsNotRemembered(t *testing.T) {
	const name = "shop1.example.org"
	now := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	fs := &certmagic.FileStorage{Path: t.TempDir()}
	storeCert(t, fs, "other.example.org", now.Add(-time.Hour), now.Add(90*24*time.Hour)) // the issuer directory exists
	st := &gatedStorage{FileStorage: fs, gate: "certificates/" + testIssuer + "/" + name + "/" + name + ".crt",
		started: make(chan struct{}), release: make(chan struct{})}
	var h heldCerts

	stale := make(chan heldCert)
	go func() { stale <- h.lookup(context.Background(), st, name, now) }()
	<-st.started // the in-flight read has seen no certificate
	storeCert(t, fs, name, now.Add(-time.Minute), now.Add(90*24*time.Hour))
	h.forget(name) // an approval, whose order then landed
	close(st.release)
	if c := <-stale; c.held {
		t.Fatalf("the in-flight read saw a certificate it was started before")
	}
	if c := h.lookup(context.Background(), st, name, now.Add(time.Second)); !c.held {
		t.Errorf("a second after the order landed, the cache says %s holds no certificate (a read older than the forget was remembered)", name)
	}
}

// TestTheHeldCertificateCacheIsBounded: the cache remembers at most maxHeldCerts names
// (the permission asks only for document names, but a fleet may have more than that).
func TestTheHeldCertificateCacheIsBounded(t *testing.T) {
	fs := &certmagic.FileStorage{Path: t.TempDir()}
	now := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	var h heldCerts
	for i := range maxHeldCerts + 500 {
		h.lookup(context.Background(), fs, fmt.Sprintf("n%d.example.org", i), now)
	}
	if n := len(h.names); n > maxHeldCerts {
		t.Fatalf("%d names remembered, want at most %d", n, maxHeldCerts)
	}
}
