package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

func newDir(t *testing.T) *dir.Store {
	t.Helper()
	s, err := dir.New(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBumpSerialCreatesThenIncrements(t *testing.T) {
	s := newDir(t)
	if n, etag, err := store.ReadSerial(t.Context(), s); err != nil || n != 0 || etag != "" {
		t.Fatalf("ReadSerial of an empty store = %d, %q, %v; want 0, \"\", nil", n, etag, err)
	}
	for want := uint64(1); want <= 3; want++ {
		got, err := store.BumpSerial(t.Context(), s)
		if err != nil || got != want {
			t.Fatalf("BumpSerial = %d, %v; want %d", got, err, want)
		}
	}
	obj, err := s.Get(t.Context(), store.SerialKey)
	n, epoch, perr := store.ParseSerialEpoch(obj.Value)
	if err != nil || perr != nil || n != 3 || len(epoch) != 16 || string(obj.Value) != "3 "+epoch {
		t.Fatalf("serial object = %q, %v, %v; want \"3 <16-hex epoch>\"", obj.Value, err, perr)
	}
	// Bumps keep the epoch minted at creation.
	store.BumpSerial(t.Context(), s)
	if obj, _ := s.Get(t.Context(), store.SerialKey); string(obj.Value) != "4 "+epoch {
		t.Fatalf("serial after a bump = %q, want %q", obj.Value, "4 "+epoch)
	}
	obj, _ = s.Get(t.Context(), store.SerialKey)
	n, etag, err := store.ReadSerial(t.Context(), s)
	if err != nil || n != 4 || etag != obj.ETag {
		t.Fatalf("ReadSerial = %d, %q, %v; want 4, %q", n, etag, err, obj.ETag)
	}
}

func TestMalformedSerialIsAnErrorNotAReset(t *testing.T) {
	for _, bad := range []string{"", "abc", "-1", "1.5", "18446744073709551616", "3 XYZ", "3 0123456789abcdeF", "3 0123"} {
		t.Run(bad, func(t *testing.T) {
			s := newDir(t)
			if _, err := s.Put(t.Context(), store.SerialKey, []byte(bad), store.Condition{}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.BumpSerial(t.Context(), s); err == nil || !strings.Contains(err.Error(), `"serial"`) {
				t.Fatalf("BumpSerial over %q: err = %v, want a parse error naming the serial", bad, err)
			}
			if _, _, err := store.ReadSerial(t.Context(), s); err == nil {
				t.Fatalf("ReadSerial over %q succeeded", bad)
			}
			obj, _ := s.Get(t.Context(), store.SerialKey)
			if string(obj.Value) != bad {
				t.Fatalf("serial after failed bump = %q, want %q untouched", obj.Value, bad)
			}
		})
	}
}

// conflictStore fails the first n conditional writes as if another writer won.
type conflictStore struct {
	store.Store
	n int
}

func (c *conflictStore) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	if c.n > 0 {
		c.n--
		return "", store.ErrPreconditionFailed
	}
	return c.Store.Put(ctx, key, value, cond)
}

// TestUpdateRetriesConflictsOnly: a lost compare-and-swap is retried until it lands or
// the context ends; any other error (fn's own) is returned after one call.
func TestUpdateRetriesConflictsOnly(t *testing.T) {
	s := &conflictStore{Store: newDir(t), n: 3}
	if n, err := store.BumpSerial(t.Context(), s); err != nil || n != 1 {
		t.Fatalf("BumpSerial after 3 conflicts = %d, %v; want 1", n, err)
	}
	calls := 0
	_, _, err := store.Update(t.Context(), s, "apps/x.json", func([]byte, bool) ([]byte, error) {
		calls++
		return nil, errors.New("refused by fn")
	})
	if err == nil || !strings.Contains(err.Error(), "refused by fn") || calls != 1 {
		t.Fatalf("Update = %v after %d calls; want fn's error after 1 call", err, calls)
	}
	s.n = 1 << 30
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := store.BumpSerial(ctx, s); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("BumpSerial against endless conflicts: err = %v, want DeadlineExceeded", err)
	}
}
