package scafo

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// hostileNode is a node (or a corrupt store behind one) that answers whatever it is
// asked, keys the ingress never wrote included, and lists keys of its choosing.
type hostileNode struct {
	mu   sync.Mutex
	vals map[string][]byte
	list []string
}

func (h *hostileNode) Store(_ context.Context, k string, v []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vals[k] = v
	return nil
}
func (h *hostileNode) Load(_ context.Context, k string) ([]byte, error) {
	return []byte("planted by a node"), nil
}
func (h *hostileNode) Delete(context.Context, string) error { return nil }
func (h *hostileNode) Exists(context.Context, string) bool  { return true }
func (h *hostileNode) List(context.Context, string, bool) ([]string, error) {
	return h.list, nil
}
func (h *hostileNode) Stat(_ context.Context, k string) (certmagic.KeyInfo, error) {
	return certmagic.KeyInfo{Key: k, Modified: time.Now(), IsTerminal: true}, nil
}
func (h *hostileNode) Lock(context.Context, string) error            { return nil }
func (h *hostileNode) Unlock(context.Context, string) error          { return nil }
func (h *hostileNode) TryLock(context.Context, string) (bool, error) { return true, nil }
func (h *hostileNode) RenewLockLease(context.Context, string, time.Duration) error {
	return nil
}

// A key that names a place outside the storage's directory (dot segments, an absolute
// path, a backslash) is refused on every operation, and never listed: a node, or a
// corrupt store object it lists, cannot make the ingress write, overwrite (its own ACME
// account key) or delete files outside its cache and account directories. CertMagic
// loads and deletes what List returns (storage cleaning), so a listed key is as
// dangerous as one asked for.
func TestSplitStorageRefusesKeysOutsideItsDirectories(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	cacheDir := filepath.Join(data, "scafo", "storage-cache")
	victim := filepath.Join(root, "victim")
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"certificates/../../../../victim/planted",
		"../../acme/acme-v02.api.letsencrypt.org-directory/users/a@b/a.key",
		"ocsp/../../../../victim",
		"acme/../../victim/planted",
		"/" + filepath.ToSlash(filepath.Join(victim, "planted")),
		`certificates\..\..\..\..\victim\planted`,
		"certificates/./x",
		"certificates//x",
	}
	node := &hostileNode{vals: map[string][]byte{}, list: append([]string{"certificates/ok/ok.crt"}, bad...)}
	s := NewSplitStorage(node, &certmagic.FileStorage{Path: data}).WithCache(&certmagic.FileStorage{Path: cacheDir})
	ctx := t.Context()
	for _, k := range bad {
		if v, err := s.Load(ctx, k); err == nil {
			t.Errorf("Load(%q) = %q, want an error", k, v)
		}
		if err := s.Store(ctx, k, []byte("planted")); err == nil {
			t.Errorf("Store(%q) succeeded", k)
		}
		if err := s.Delete(ctx, k); err == nil {
			t.Errorf("Delete(%q) succeeded", k)
		}
		if _, err := s.Stat(ctx, k); err == nil {
			t.Errorf("Stat(%q) succeeded", k)
		}
		if s.Exists(ctx, k) {
			t.Errorf("Exists(%q) = true", k)
		}
	}
	for _, prefix := range []string{"", "certificates", "ocsp"} {
		keys, err := s.List(ctx, prefix, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if strings.Contains(k, "..") || strings.HasPrefix(k, "/") || strings.Contains(k, `\`) || strings.Contains(k, "//") || strings.Contains(k, "/./") {
				t.Errorf("List(%q) returned %q", prefix, k)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Errorf("a file outside the storage was deleted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(victim, "planted")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was written outside the storage: %v", err)
	}
	filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "acme") {
			t.Errorf("a node wrote into the local account directory: %s", p)
		}
		return nil
	})
	// The canonical keys still work.
	if _, err := s.Load(ctx, "certificates/ok/ok.crt"); err != nil {
		t.Fatal(err)
	}
}
