package scafo

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/node/certstore/certstoretest"
	"github.com/scafo/ingress/node/storageclient"
)

func nodeClient(t *testing.T, n *testNode) *storageclient.Client {
	t.Helper()
	c, err := storageclient.New(n.url, testIngressToken, storageclient.Options{LockLease: 2 * time.Second, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// twoStorageNodes starts two nodes over one fleet store.
func twoStorageNodes(t *testing.T) (*testNode, *testNode) {
	root := t.TempDir()
	a, b := startNode(t, "vps-a", root), startNode(t, "vps-b", root)
	for _, n := range []*testNode{a, b} {
		n.waitFirstPass()
	}
	return a, b
}

// The storage behaves as CertMagic's FileStorage, its reference, over the CertMagic
// storage suite's random sequence (certstoretest.MatchesFileStorage) mixing account
// keys (local) and everything else (the node), written through one node and read
// through another, the root listing included.
func TestSplitStorageMatchesFileStorage(t *testing.T) {
	na, nb := twoStorageNodes(t)
	accounts := t.TempDir()
	// Each with its own cache, which must change nothing while the nodes answer.
	writer := NewSplitStorage(nodeClient(t, na), &certmagic.FileStorage{Path: accounts}).WithCache(&certmagic.FileStorage{Path: t.TempDir()})
	reader := NewSplitStorage(nodeClient(t, nb), &certmagic.FileStorage{Path: accounts}).WithCache(&certmagic.FileStorage{Path: t.TempDir()})
	certstoretest.MatchesFileStorage(t, writer, reader, certstoretest.Oracle{Seed1: 26, Seed2: 9, Ops: 240,
		Tops: []string{"acme", "certificates", "ocsp"}, Segs: []string{"a", "b", "a.b", "*", "x@y:z", "ü", "users"},
		RootList: true, EmptyListsAgree: true, KeepsEmptyDir: isAccountKey})
}

// The ACME account never leaves this machine: keys under acme/ are files in the
// account directory and absent from the fleet store. Everything else is the fleet's:
// certificates, and the challenge tokens of CertMagic's distributed HTTP-01 solving
// (acme/<issuer>/challenge_tokens/: the Caddy that ordered writes one, the Caddy the
// CA's validation reaches, on another machine, must read it), written through one
// Caddy's node and read or deleted through another's, and absent from the account
// directory.
func TestSplitStorageKeepsTheAccountLocalAndSharesTheRest(t *testing.T) {
	na, nb := twoStorageNodes(t)
	ctx := t.Context()
	acctA := t.TempDir()
	a := NewSplitStorage(nodeClient(t, na), &certmagic.FileStorage{Path: acctA})
	b := NewSplitStorage(nodeClient(t, nb), &certmagic.FileStorage{Path: t.TempDir()})
	acct := "acme/acme-v02.api.letsencrypt.org-directory/users/ops@example.com/ops.key"
	tok := "acme/acme-v02.api.letsencrypt.org-directory/challenge_tokens/tls2.example.org.json"
	cert := "certificates/acme-v02.api.letsencrypt.org-directory/shop.example.org/shop.example.org.crt"
	for _, k := range []string{acct, tok, cert} {
		if err := a.Store(ctx, k, []byte("v:"+k)); err != nil {
			t.Fatal(err)
		}
	}
	other := nodeClient(t, nb)
	if b.Exists(ctx, acct) || other.Exists(ctx, acct) || other.Exists(ctx, "acme/acme-v02.api.letsencrypt.org-directory/users") {
		t.Fatal("the ACME account reached the other Caddy or the fleet store")
	}
	for _, k := range []string{tok, cert} {
		if v, err := b.Load(ctx, k); err != nil || string(v) != "v:"+k {
			t.Fatalf("%s through the other Caddy's storage: %q, %v", k, v, err)
		}
	}
	if v, err := os.ReadFile(filepath.Join(acctA, filepath.FromSlash(acct))); err != nil || string(v) != "v:"+acct {
		t.Fatalf("the account key on local disk: %q, %v", v, err)
	}
	for _, k := range []string{tok, cert} {
		if _, err := os.Stat(filepath.Join(acctA, filepath.FromSlash(k))); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s was written to the account directory: %v", k, err)
		}
	}
	if err := b.Delete(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if a.Exists(ctx, tok) {
		t.Fatal("the challenge token deleted through one Caddy is still there through the other")
	}
	for k, want := range map[string]bool{"acme": true, "acme/x": true, "acme/x/users": true, "acme/x/users/u/k.key": true,
		"acme/x/challenge_tokens": false, "acme/x/challenge_tokens/n.json": false, "certificates/x/challenge_tokens/n": false, "acmex/y": false} {
		if got := isAccountKey(k); got != want {
			t.Errorf("isAccountKey(%q) = %v, want %v", k, got, want)
		}
	}
}

// Locks are the fleet's: goroutines behind two Caddys' storages, each on its own node,
// increment one counter under one lock; no update is lost, no critical sections overlap
// (certstoretest.Locks).
func TestSplitStorageLocksAcrossNodes(t *testing.T) {
	na, nb := twoStorageNodes(t)
	certstoretest.Locks(t, "certificates/counter", "issue_cert_counter.example.org", 2, 4,
		NewSplitStorage(nodeClient(t, na), &certmagic.FileStorage{Path: t.TempDir()}),
		NewSplitStorage(nodeClient(t, nb), &certmagic.FileStorage{Path: t.TempDir()}))
}

// `storage scafo { … }` as an operator writes it: the first endpoint is dead, the module
// moves to the next one, and what it stores is in the fleet store.
func TestStorageModuleFailsOverBetweenEndpoints(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, "vps-a", root)
	n.waitFirstPass()
	dead := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	t.Setenv("SCAFO_TEST_TOKEN", testIngressToken)
	accounts, cache := t.TempDir(), t.TempDir()
	d := caddyfile.NewTestDispenser("scafo {\n endpoints " + dead + " " + n.url + "\n token_env SCAFO_TEST_TOKEN\n account_dir " + accounts +
		"\n cache_dir " + cache + "\n lock_lease 5s\n}")
	var mod Storage
	if err := mod.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mod.Endpoints, []string{dead, n.url}) || mod.TokenEnv != "SCAFO_TEST_TOKEN" || mod.AccountDir != accounts || mod.CacheDir != cache || time.Duration(mod.LockLease) != 5*time.Second {
		t.Fatalf("parsed %+v", mod)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := mod.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := mod.CertMagicStorage()
	if err != nil {
		t.Fatal(err)
	}
	k := "certificates/x/shop.example.org/shop.example.org.crt"
	if err := st.Store(ctx, k, []byte("pem")); err != nil {
		t.Fatalf("Store with the first endpoint dead: %v", err)
	}
	if b, err := nodeClient(t, n).Load(ctx, k); err != nil || string(b) != "pem" {
		t.Fatalf("the fleet store has %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(cache, filepath.FromSlash(k))); err != nil || string(b) != "pem" {
		t.Fatalf("the storage cache has %q, %v", b, err)
	}
	if err := st.(certmagic.Locker).Lock(ctx, "issue_cert_shop.example.org"); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := st.(certmagic.Locker).Unlock(ctx, "issue_cert_shop.example.org"); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	var bad Storage
	if err := bad.UnmarshalCaddyfile(caddyfile.NewTestDispenser("scafo {\n bucket x\n}")); err == nil || !strings.Contains(err.Error(), "bucket") {
		t.Fatalf("an unknown option: %v, want an error naming it", err)
	}
	t.Setenv("SCAFO_INGRESS_TOKEN", "")
	none := Storage{Nodes: Nodes{Endpoints: []string{n.url}}}
	if err := none.Provision(ctx); err == nil || !strings.Contains(err.Error(), "SCAFO_INGRESS_TOKEN") {
		t.Fatalf("no token: %v, want an error naming SCAFO_INGRESS_TOKEN", err)
	}
}

// The cache answers only while no node can be reached: with the node up, a key deleted
// behind this storage's back is gone (the node's "not found" is final, and drops the
// key from the cache, whether Load or Stat heard it); with the node down, what was read
// or written before is served from the cache, and what never was, or was gone, is an
// error.
func TestSplitStorageCacheServesOnlyWhileNodesAreUnreachable(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, "vps-a", root)
	n.waitFirstPass()
	ctx := t.Context()
	s := NewSplitStorage(nodeClient(t, n), &certmagic.FileStorage{Path: t.TempDir()}).WithCache(&certmagic.FileStorage{Path: t.TempDir()})
	kept, gone, statted := "certificates/x/a.example.org/a.example.org.crt", "certificates/x/b.example.org/b.example.org.crt", "certificates/x/c.example.org/c.example.org.key"
	for _, k := range []string{kept, gone, statted} {
		if err := s.Store(ctx, k, []byte("pem:"+k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{gone, statted} {
		if err := nodeClient(t, n).Delete(ctx, k); err != nil { // another Caddy deletes it
			t.Fatal(err)
		}
	}
	if _, err := s.Load(ctx, gone); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a key the node no longer has, node up: Load = %v, want not exist (the cache must not answer)", err)
	}
	if s.Exists(ctx, statted) {
		t.Fatal("a key the node no longer has, node up: Exists = true")
	}
	n.stop()
	if v, err := s.Load(ctx, kept); err != nil || string(v) != "pem:"+kept {
		t.Fatalf("node down: Load(%q) = %q, %v; want the cached value", kept, v, err)
	}
	if !s.Exists(ctx, kept) {
		t.Fatal("node down: Exists of a cached key = false")
	}
	if ki, err := s.Stat(ctx, kept); err != nil || !ki.IsTerminal || ki.Size != int64(len("pem:"+kept)) {
		t.Fatalf("node down: Stat = %+v, %v", ki, err)
	}
	for _, k := range []string{gone, statted, "certificates/x/never/never.crt"} {
		if v, err := s.Load(ctx, k); err == nil {
			t.Errorf("node down: Load(%q) = %q from the cache, a key never seen or gone", k, v)
		}
		if s.Exists(ctx, k) {
			t.Errorf("node down: Exists(%q) = true from the cache, a key never seen or gone", k)
		}
	}
	if err := s.Store(ctx, "certificates/x/c/c.crt", []byte("x")); err == nil {
		t.Fatal("node down: Store succeeded (it must fail: the fleet store is the truth)")
	}
}
