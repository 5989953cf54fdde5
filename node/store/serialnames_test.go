package store_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/scafo/ingress/node/store"
)

// oldParseSerialEpoch is ParseSerialEpoch (and isEpoch) as nodes built before named
// bumps have them (main at 02c2180), errors reduced to ok: what an old node does with
// a new serial.
func oldParseSerialEpoch(value []byte) (uint64, string, bool) {
	s := strings.TrimSpace(string(value))
	num, epoch, _ := strings.Cut(s, " ")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, "", false
	}
	if epoch != "" && !oldIsEpoch(epoch) {
		return 0, "", false
	}
	return n, epoch, true
}

func oldIsEpoch(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// A serial that names keys reads, to a node that knows names, as the counter, the
// epoch and the keys; to an old node (and to ParseSerialEpoch) as the counter and the
// epoch alone: the names are written in whitespace, which the old parser trims.
func TestSerialNamesRoundTripAndOldNodesParseThem(t *testing.T) {
	names := []string{"apps/shop.json", "domains/ti.to.json", "nodes/vps-a.json", "tokens/0123456789abcdef.json"}
	for _, epoch := range []string{"3f9a0c1e5b7d2a64", ""} {
		v := store.FormatSerialNames(42, epoch, names)
		n, e, got, err := store.ParseSerialNames(v)
		if err != nil || n != 42 || e != epoch || !slices.Equal(got, names) {
			t.Fatalf("ParseSerialNames(%q) = %d, %q, %q, %v", v, n, e, got, err)
		}
		if strings.TrimSpace(string(v)) != string(store.FormatSerial(42, epoch)) {
			t.Fatalf("the names are not whitespace only: %q", v)
		}
		if n, e, err := store.ParseSerialEpoch(v); err != nil || n != 42 || e != epoch {
			t.Fatalf("ParseSerialEpoch(%q) = %d, %q, %v", v, n, e, err)
		}
		if n, e, ok := oldParseSerialEpoch(v); !ok || n != 42 || e != epoch {
			t.Fatalf("an old node parses %q as %d, %q, %v", v, n, e, ok)
		}
	}
	// No names: the plain format, and readers read everything. So does a serial naming
	// more keys than any bump writes (MaxSerialNames: a hand-edited or hostile one, whose
	// every name a node one step behind would read; here four bumps' trailers).
	many := store.FormatSerialNames(7, "3f9a0c1e5b7d2a64", names[:1])
	for i := range 4 * store.MaxSerialNames {
		more := store.FormatSerialNames(7, "3f9a0c1e5b7d2a64", []string{fmt.Sprintf("apps/a%d.json", i)})
		many = append(many, more[len(store.FormatSerial(7, "3f9a0c1e5b7d2a64")):]...) // its trailer only
	}
	for _, v := range [][]byte{many, store.FormatSerial(7, "3f9a0c1e5b7d2a64"), store.FormatSerialNames(7, "3f9a0c1e5b7d2a64", nil),
		[]byte("7 3f9a0c1e5b7d2a64\n"), []byte("7 3f9a0c1e5b7d2a64\n\t\t\t"), // a trailer that does not decode
		store.FormatSerialNames(7, "3f9a0c1e5b7d2a64", make([]string, store.MaxSerialNames+1))} {
		if n, _, got, err := store.ParseSerialNames(v); err != nil || n != 7 || got != nil {
			t.Errorf("ParseSerialNames(%q) = %d, %q, %v; want 7 and no names", v, n, got, err)
		}
	}
}

// A bump names what its writer passed, computed on every attempt of its CAS loop; an
// Identity one step behind sees OneStep with those names, two steps behind does not.
func TestBumpNamesAndOneStep(t *testing.T) {
	s := newDir(t)
	ctx := t.Context()
	var id store.Identity
	if _, err := id.Bump(ctx, s, "apps/a.json"); err != nil {
		t.Fatal(err)
	}
	o, err := id.Observe(ctx, s)
	if err != nil || !o.Changed || o.OneStep {
		t.Fatalf("first observation = %+v, %v; want changed, not one step (nothing committed)", o, err)
	}
	id.Commit(o)
	if _, err := id.Bump(ctx, s, "apps/b.json", "domains/b.example.json"); err != nil {
		t.Fatal(err)
	}
	o, err = id.Observe(ctx, s)
	if err != nil || !o.OneStep || !slices.Equal(o.Names, []string{"apps/b.json", "domains/b.example.json"}) {
		t.Fatalf("one step behind: %+v, %v", o, err)
	}
	id.Commit(o)
	// Two bumps: a gap.
	store.BumpSerial(ctx, s, "apps/c.json")
	store.BumpSerial(ctx, s, "apps/d.json")
	if o, err = id.Observe(ctx, s); err != nil || !o.Changed || o.OneStep {
		t.Fatalf("two steps behind: %+v, %v; want a full read", o, err)
	}
	id.Commit(o)
	// A bump without names (an old node's): a full read.
	store.BumpSerial(ctx, s)
	if o, err = id.Observe(ctx, s); err != nil || !o.Changed || o.OneStep {
		t.Fatalf("a bump without names: %+v, %v; want a full read", o, err)
	}
}

// recordingStore keeps every serial value a Put wrote.
type recordingStore struct {
	store.Store
	mu      sync.Mutex
	written [][]byte
}

func (r *recordingStore) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	etag, err := r.Store.Put(ctx, key, value, cond)
	if err == nil && key == store.SerialKey {
		r.mu.Lock()
		r.written = append(r.written, append([]byte(nil), value...))
		r.mu.Unlock()
	}
	return etag, err
}

// Concurrent bumps each get their own counter and name only their own keys: the CAS
// loop formats the value again on every attempt, from the serial it lost to.
func TestConcurrentBumpsNameTheirOwnKeys(t *testing.T) {
	rs := &recordingStore{Store: newDir(t)}
	if _, err := store.BumpSerial(t.Context(), rs); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := store.BumpSerial(t.Context(), rs, fmt.Sprintf("apps/w%d.json", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	names := map[string]bool{}
	for _, v := range rs.written[1:] {
		n, _, got, err := store.ParseSerialNames(v)
		if err != nil || len(got) != 1 || seen[n] || names[got[0]] {
			t.Fatalf("serial %q: %d %q %v (a counter or a name twice, or not one name)", v, n, got, err)
		}
		seen[n], names[got[0]] = true, true
	}
	if len(seen) != writers {
		t.Fatalf("%d bumps written, want %d", len(seen), writers)
	}
}
