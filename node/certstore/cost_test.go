package certstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// callCounter counts store calls by method.
type callCounter struct {
	store.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) add(m string) {
	c.mu.Lock()
	c.calls[m]++
	c.mu.Unlock()
}

func (c *callCounter) take() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for m, n := range c.calls {
		parts = append(parts, fmt.Sprintf("%s=%d", m, n))
	}
	sort.Strings(parts)
	c.calls = map[string]int{}
	return strings.Join(parts, " ")
}

func (c *callCounter) Get(ctx context.Context, k string) (store.Object, error) {
	c.add("get")
	return c.Store.Get(ctx, k)
}

func (c *callCounter) List(ctx context.Context, p string) ([]store.Entry, error) {
	c.add("list")
	return c.Store.List(ctx, p)
}

func (c *callCounter) Put(ctx context.Context, k string, v []byte, cond store.Condition) (string, error) {
	c.add("put")
	return c.Store.Put(ctx, k, v, cond)
}

func (c *callCounter) Delete(ctx context.Context, k, m string) error {
	c.add("delete")
	return c.Store.Delete(ctx, k, m)
}

// TestStoreCallsPerOperation pins what each CertMagic operation costs in store calls
// (on S3 each call is one request, except Delete: a HEAD and a DELETE). A change that
// makes an operation dearer fails here and must say why. Values are certmagic's usual
// keys; "hashed" is a key with a segment over 200 bytes escaped.
func TestStoreCallsPerOperation(t *testing.T) {
	ctx := context.Background()
	inner, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &callCounter{Store: inner, calls: map[string]int{}}
	s := New(c, quietOpts(Options{LockLease: time.Minute}))
	site := "certificates/acme-v02.api.letsencrypt.org-directory/example.com"
	long := "certificates/acme/" + strings.Repeat("abcdefghi.", 25) + "com"
	steps := []struct {
		name, want string
		do         func() error
	}{
		{"Store", "put=1", func() error { return s.Store(ctx, site+"/example.com.crt", []byte("c")) }},
		{"Load", "get=1", func() error { _, err := s.Load(ctx, site+"/example.com.crt"); return err }},
		{"Load (absent)", "get=1", func() error { _, err := s.Load(ctx, site+"/nope"); return ignoreNotExist(err) }},
		{"Stat (value)", "get=1", func() error { _, err := s.Stat(ctx, site+"/example.com.crt"); return err }},
		{"Stat (directory)", "get=1 list=1", func() error { _, err := s.Stat(ctx, site); return err }},
		{"Exists (value)", "get=1", func() error { s.Exists(ctx, site+"/example.com.crt"); return nil }},
		{"Exists (absent)", "get=1 list=1", func() error { s.Exists(ctx, site+"/nope"); return nil }},
		{"List (one page)", "list=1", func() error { _, err := s.List(ctx, "certificates", false); return err }},
		{"Store (hashed)", "put=1", func() error { return s.Store(ctx, long+"/x.crt", []byte("c")) }},
		{"Store (hashed, 2nd value)", "put=1", func() error { return s.Store(ctx, long+"/x.key", []byte("k")) }},
		{"List (2 values below a hashed segment)", "get=1 list=1", func() error { _, err := s.List(ctx, "certificates/acme", true); return err }},
		{"Delete (value)", "delete=1 list=1", func() error { return s.Delete(ctx, site+"/example.com.crt") }},
		{"Lock (free)", "get=1 put=1", func() error { return s.Lock(ctx, "issue_cert_example.com") }},
		{"RenewLockLease", "get=1 put=1", func() error { return s.RenewLockLease(ctx, "issue_cert_example.com", 0) }},
		{"TryLock (held elsewhere)", "get=1", func() error {
			other := New(c, quietOpts(Options{LockLease: time.Minute}))
			ok, err := other.TryLock(ctx, "issue_cert_example.com")
			if ok {
				return fmt.Errorf("took a held lock")
			}
			return err
		}},
		{"Unlock", "delete=1 get=1", func() error { return s.Unlock(ctx, "issue_cert_example.com") }},
	}
	c.take()
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := c.take()
		t.Logf("%-28s %s", st.name, got)
		if got != st.want {
			t.Errorf("%s: %s, want %s", st.name, got, st.want)
		}
	}
}

func ignoreNotExist(err error) error {
	if err != nil && strings.Contains(err.Error(), "not exist") {
		return nil
	}
	return err
}
