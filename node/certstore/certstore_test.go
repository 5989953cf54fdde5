package certstore

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// dirStore opens a fresh directory store; open opens another client on it (a second
// node). What this package adds runs on the dir store: storetest holds every backend to
// the store's contract.
func dirStore(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
	root := t.TempDir()
	open := func(t *testing.T) store.Store {
		st, err := dir.New(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	return open(t), open
}

func quietOpts(o Options) Options {
	o.Logger = slog.New(slog.DiscardHandler)
	return o
}

// oddKeys are keys whose characters a naive mapping gets wrong: escapes that look like
// path separators, the escape and mark characters themselves, dots, spaces, non-ASCII,
// and segments long enough to be hashed.
func oddKeys() []string {
	long := strings.Repeat("x", 250)
	longDomain := strings.Repeat("abcdefghi.", 25) + "com" // 253 bytes
	return []string{
		"certificates/acme-v02.api.letsencrypt.org-directory/*.example.com/*.example.com.crt",
		"wildcard_.example.com@user:8443",
		"a%2Fb",   // must stay one segment
		"a%252Fb", // double-encoded
		"%2e%2e/x",
		"~!/~x!",
		"dir/.hidden",
		"dir/..x",
		"dir/x..",
		"sp ace/tab-less",
		"üñí/ç☃de",
		"a/" + long,
		"a/" + long + "y",
		"certificates/acme/" + longDomain + "/" + longDomain + ".crt",
		"certificates/acme/" + longDomain + "/" + longDomain + ".key",
		"q?x=1&y=2#frag",
		"A/a", // case is significant
		"a/a",
	}
}

func TestKeyRules(t *testing.T) {
	cases := []struct {
		key, err string
	}{
		{"certificates/x/y.crt", ""},
		{"a", ""},
		{"*", ""},
		{"..x", ""},
		{"", "empty key"},
		{"/abs", "absolute"},
		{"a/", "trailing slash"},
		{"a//b", "empty segment"},
		{"..", `".." segment`},
		{"a/../b", `".." segment`},
		{"./a", `"." segment`},
		{"a\\b", "backslash"},
		{"a\x00b", "control character"},
		{"a\nb", "control character"},
		{"a\x7fb", "control character"},
		{"\xff", "UTF-8"},
		{strings.Repeat("a", MaxKeyLen+1), "longer than 1024"},
		// 10 segments of 90 escaped-to-270 bytes: each hashed, but 10×130 is over the
		// store's limit.
		{strings.Repeat(strings.Repeat("*", 90)+"/", 9) + "x", "maps to a"},
	}
	for _, c := range cases {
		err := CheckKey(c.key)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("CheckKey(%.40q) = %v, want nil", c.key, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrInvalidKey)):
			t.Errorf("CheckKey(%.40q) = %v, want ErrInvalidKey containing %q", c.key, err, c.err)
		}
	}
	for _, k := range oddKeys() {
		if err := CheckKey(k); err != nil {
			t.Errorf("odd key %.60q refused: %v", k, err)
		}
	}
}

// TestMappingIsInjectiveAndStaysInNamespace: distinct keys never share a store key, no
// store key leaves certs/, no segment exceeds MinIO's 255 bytes, and each plain segment
// decodes back to itself.
func TestMappingIsInjectiveAndStaysInNamespace(t *testing.T) {
	keys := oddKeys()
	for _, seg := range []string{"a", "A", "a.", ".a", "a!", "a~", "%41", "A%", "@", "-", "_", "é", "%", "!", "~"} {
		keys = append(keys, seg, "d/"+seg, seg+"/d")
	}
	seen := map[string]string{}
	for _, k := range keys {
		if CheckKey(k) != nil {
			continue
		}
		for _, file := range []bool{true, false} {
			sk, err := dataKey(k, file)
			if err != nil {
				t.Fatal(err)
			}
			if other, dup := seen[sk]; dup {
				t.Fatalf("keys %q and %q (file=%v) both map to %q", other, k, file, sk)
			}
			seen[sk] = k
			if !strings.HasPrefix(sk, DataPrefix) || store.CheckKey(strings.TrimSuffix(sk, "/")) != nil {
				t.Fatalf("key %q maps to %q: outside the namespace or not a store key", k, sk)
			}
			for seg := range strings.SplitSeq(strings.TrimSuffix(sk, "/"), "/") {
				if len(seg) > 255 {
					t.Fatalf("key %.40q maps to a %d-byte segment", k, len(seg))
				}
			}
		}
		for seg := range strings.SplitSeq(k, "/") {
			got, hashed, ok := unescapeSegment(escapeSegment(seg))
			if !ok || (!hashed && got != seg) {
				t.Errorf("segment %.40q: unescape(escape) = %q, hashed %v, ok %v", seg, got, hashed, ok)
			}
		}
	}
	// Non-canonical spellings a foreign writer could leave are not decoded.
	for _, s := range []string{"%2f", "%4", "%zz", ".a", "a b", "%41", "a~b", "a~" + strings.Repeat("g", 32)} {
		if _, _, ok := unescapeSegment(s); ok {
			t.Errorf("unescapeSegment(%q) accepted a spelling escapeSegment never writes", s)
		}
	}
}

func TestOddKeysRoundTrip(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	s := New(st, quietOpts(Options{}))
	keys := oddKeys()
	for _, k := range keys {
		if err := s.Store(ctx, k, []byte("value of "+k)); err != nil {
			t.Fatalf("Store(%.60q): %v", k, err)
		}
	}
	for _, k := range keys {
		v, err := s.Load(ctx, k)
		if err != nil || string(v) != "value of "+k {
			t.Fatalf("Load(%.60q) = %q, %v", k, v, err)
		}
		ki, err := s.Stat(ctx, k)
		if err != nil || !ki.IsTerminal || ki.Size != int64(len("value of "+k)) || ki.Key != k || ki.Modified.IsZero() {
			t.Fatalf("Stat(%.60q) = %+v, %v", k, ki, err)
		}
	}
	got, err := s.List(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	// Every key and every directory above it, once.
	wantSet := map[string]bool{}
	for _, k := range keys {
		segs := strings.Split(k, "/")
		for i := range segs {
			wantSet[strings.Join(segs[:i+1], "/")] = true
		}
	}
	var want []string
	for k := range wantSet {
		want = append(want, k)
	}
	slices.SortFunc(want, compareKeys)
	if !slices.Equal(got, want) {
		t.Fatalf("List(\"\", recursive):\n got %q\nwant %q", got, want)
	}
	// The two long-domain keys share a hashed directory: a non-recursive list of
	// its parent names it by its real name.
	longDomain := strings.Repeat("abcdefghi.", 25) + "com"
	got, err = s.List(ctx, "certificates/acme", false)
	if err != nil || !slices.Equal(got, []string{"certificates/acme/" + longDomain}) {
		t.Fatalf("List(certificates/acme) = %q, %v", got, err)
	}
	got, err = s.List(ctx, "certificates/acme/"+longDomain, false)
	if err != nil || len(got) != 2 {
		t.Fatalf("List(long domain dir) = %q, %v", got, err)
	}
	// "a%2Fb" is one segment: no directory "a" holds a "b".
	if s.Exists(ctx, "a/b") {
		t.Fatal(`"a%2Fb" was stored as a path a/b`)
	}
}

func TestValueSizeBound(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	s := New(st, quietOpts(Options{}))
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, DefaultMaxValueSize/4)
	if err := s.Store(ctx, "big", big); err != nil {
		t.Fatalf("a 1 MiB value: %v", err)
	}
	got, err := s.Load(ctx, "big")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("1 MiB value did not round-trip: %d bytes, %v", len(got), err)
	}
	err = s.Store(ctx, "bigger", append(big, 0))
	if !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("a value one byte over the limit: %v, want ErrValueTooLarge", err)
	}
	if s.Exists(ctx, "bigger") {
		t.Fatal("an oversized value was written")
	}
}

// TestInvalidKeysAreErrorsNotAbsent: an invalid key is ErrInvalidKey, never "absent"
// (fs.ErrNotExist, whose semantics TestMatchesFileStorage compares with FileStorage's),
// and Delete("") never wipes the namespace.
func TestInvalidKeysAreErrorsNotAbsent(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	s := New(st, quietOpts(Options{}))
	if err := s.Store(ctx, "keep/me", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "/", "..", "keep/..", "keep/../keep"} {
		if err := s.Delete(ctx, bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", bad, err)
		}
		if _, err := s.Load(ctx, bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Load(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	if !s.Exists(ctx, "keep/me") {
		t.Fatal("an invalid Delete removed a value")
	}
}

// TestCorruptObjectsAreNotServed: an object in the namespace that this package did not
// write (edited, truncated, moved) is an error on Load and skipped by List.
func TestCorruptObjectsAreNotServed(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	s := New(st, quietOpts(Options{}))
	if err := s.Store(ctx, "d/good", []byte("PEM")); err != nil {
		t.Fatal(err)
	}
	goodKey, _ := dataKey("d/good", true)
	good, err := st.Get(ctx, goodKey)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, b []byte) {
		t.Helper()
		sk, _ := dataKey(key, true)
		if _, err := st.Put(ctx, sk, b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	put("d/raw", []byte("-----BEGIN CERTIFICATE-----"))
	put("d/truncated", good.Value[:len(good.Value)-1])
	put("d/edited", append(bytes.Clone(good.Value[:len(good.Value)-1]), 'X'))
	put("d/moved", good.Value) // header names d/good
	for _, k := range []string{"d/raw", "d/truncated", "d/edited", "d/moved"} {
		if v, err := s.Load(ctx, k); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Load(%s) = %q, %v, want ErrCorrupt", k, v, err)
		}
	}
	// A foreign object with a non-canonical name is skipped by List.
	if _, err := st.Put(ctx, DataPrefix+"d/%2f!", []byte("x"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, DataPrefix+"d/nomark", []byte("x"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, "d", false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"d/edited", "d/good", "d/moved", "d/raw", "d/truncated"}
	if !slices.Equal(got, want) {
		t.Fatalf("List(d) = %q, want %q", got, want)
	}
}

func TestDeleteRemovesDirectories(t *testing.T) {
	st, _ := dirStore(t)
	ctx := t.Context()
	s := New(st, quietOpts(Options{}))
	for _, k := range []string{"a/b/c", "a/b/d", "a/bc", "a/b"} {
		if err := s.Store(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, "a", true)
	if err != nil || !slices.Equal(got, []string{"a/bc"}) {
		t.Fatalf("after Delete(a/b): List(a) = %q, %v; want [a/bc] (a/bc is not below a/b)", got, err)
	}
	ki, err := s.Stat(ctx, "a")
	if err != nil || ki.IsTerminal || ki.Size != 0 {
		t.Fatalf("Stat(dir a) = %+v, %v", ki, err)
	}
}
