package scafo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/node/storageclient"
	"github.com/scafo/ingress/node/store"
)

func init() {
	caddy.RegisterModule(Storage{})
}

// Storage (caddy.storage.scafo) keeps Caddy's certificates, private keys and locks in
// the fleet store through the nodes' /v1/storage with the ingress token: every Caddy of
// the fleet serves from one certificate store, and the ingress holds no bucket
// credential. Endpoints are tried in order (node/storageclient sticks to the last one
// that answered and moves on at a transport error or a 503).
//
// The ACME account (every key under "acme/" but the challenge tokens in flight,
// acme/<issuer>/challenge_tokens/, which every Caddy of the fleet must read) stays on
// this ingress's disk, in account_dir: it names no domain and belongs to no fleet.
//
// Every value read from or written to the nodes is also kept in cache_dir (mode 0600
// files, like Caddy's own file storage), and read from there when no node can be
// reached: a Caddy restarted while its nodes are down still serves the certificates it
// held. The cache is never read while a node answers (a node's "not found" is final).
type Storage struct {
	Nodes
	// AccountDir holds the ACME account (default: Caddy's data directory, where the
	// default file storage keeps it, so an existing account is found).
	AccountDir string `json:"account_dir,omitempty"`
	// LockLease is each lock's lease on the node (default 2m).
	LockLease caddy.Duration `json:"lock_lease,omitempty"`
	// CacheDir keeps what was read from the nodes, for when none answers (default
	// <Caddy data dir>/scafo/storage-cache).
	CacheDir string `json:"cache_dir,omitempty"`

	tok string
}

// CaddyModule returns the Caddy module information.
func (Storage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.storage.scafo", New: func() caddy.Module { return new(Storage) }}
}

// Provision resolves the token.
func (s *Storage) Provision(caddy.Context) error {
	if len(s.Endpoints) == 0 {
		return fmt.Errorf("scafo storage: no node endpoints")
	}
	tok, err := s.token()
	if err != nil {
		return fmt.Errorf("scafo storage: %w", err)
	}
	s.tok = tok
	return nil
}

// CertMagicStorage implements caddy.StorageConverter.
func (s *Storage) CertMagicStorage() (certmagic.Storage, error) {
	c, err := storageclient.New(s.Endpoints[0], s.tok, storageclient.Options{
		Fallbacks: s.Endpoints[1:],
		LockLease: time.Duration(s.LockLease),
	})
	if err != nil {
		return nil, err
	}
	dir := s.AccountDir
	if dir == "" {
		dir = caddy.AppDataDir()
	}
	cache := s.CacheDir
	if cache == "" {
		cache = filepath.Join(caddy.AppDataDir(), "scafo", "storage-cache")
	}
	return NewSplitStorage(c, &certmagic.FileStorage{Path: filepath.Clean(dir)}).WithCache(&certmagic.FileStorage{Path: filepath.Clean(cache)}), nil
}

// UnmarshalCaddyfile reads
//
//	storage scafo {
//		endpoints <url>...
//		token_env <VAR> | token <value>
//		account_dir <dir>
//		cache_dir <dir>
//		lock_lease <duration>
//	}
func (s *Storage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if ok, err := s.unmarshal(d); ok {
			if err != nil {
				return err
			}
			continue
		}
		switch d.Val() {
		case "account_dir":
			if !d.AllArgs(&s.AccountDir) {
				return d.ArgErr()
			}
		case "cache_dir":
			if !d.AllArgs(&s.CacheDir) {
				return d.ArgErr()
			}
		case "lock_lease":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil {
				return d.Errf("lock_lease: %v", err)
			}
			s.LockLease = caddy.Duration(dur)
		default:
			return d.Errf("scafo storage: unknown option %q", d.Val())
		}
	}
	return nil
}

// NodeStorage is what SplitStorage needs of the fleet side (node/storageclient.Client).
type NodeStorage interface {
	certmagic.Storage
	certmagic.TryLocker
	certmagic.LockLeaseRenewer
}

// SplitStorage is a certmagic.Storage that keeps the ACME account (keys under "acme/"
// but the challenge tokens) in local and everything else, locks included, in node; with a cache (WithCache), the
// node's values are copied there and read from it only while node is unavailable.
type SplitStorage struct {
	node  NodeStorage
	local certmagic.Storage
	cache certmagic.Storage
}

// WithCache sets the cache of node values and returns s.
func (s *SplitStorage) WithCache(c certmagic.Storage) *SplitStorage {
	s.cache = c
	return s
}

// unavailable reports whether err says no node could be reached (a transport error or
// a 503 from every endpoint): the only case the cache answers.
func unavailable(err error) bool { return errors.Is(err, store.ErrUnavailable) }

// NewSplitStorage returns the storage over node and local.
func NewSplitStorage(node NodeStorage, local certmagic.Storage) *SplitStorage {
	return &SplitStorage{node: node, local: local}
}

// accountPrefix is the root of CertMagic's ACME account keys
// (acme/<issuer>/users/<email>/…).
const accountPrefix = "acme"

// challengeTokens is the directory under acme/<issuer>/ where CertMagic's distributed
// solving keeps the challenges in flight (acme/<issuer>/challenge_tokens/<name>.json):
// not the account, and every Caddy of the fleet must read them, since the CA validates
// HTTP-01 at whichever Caddy the name's DNS reaches, not necessarily the one that
// ordered. They go to the node like everything else but the account.
const challengeTokens = "challenge_tokens"

func isAccountKey(key string) bool {
	if key != accountPrefix && !strings.HasPrefix(key, accountPrefix+"/") {
		return false
	}
	parts := strings.SplitN(key, "/", 4)
	return len(parts) < 3 || parts[2] != challengeTokens
}

// ErrBadKey is the answer for a key that is not a clean relative path: empty, absolute,
// with an empty, "." or ".." segment, a backslash or a NUL. Such a key would name a
// file outside the account or cache directory (certmagic.FileStorage joins keys to its
// path as given); CertMagic never makes one, so it can only come from a node's answer.
var ErrBadKey = errors.New("scafo storage: not a clean relative key")

// validKey reports whether key is a clean relative path of non-empty segments.
func validKey(key string) bool {
	if key == "" || strings.ContainsAny(key, "\\\x00") {
		return false
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func checkKey(key string) error {
	if !validKey(key) {
		return fmt.Errorf("%q: %w", key, ErrBadKey)
	}
	return nil
}

func (s *SplitStorage) pick(key string) certmagic.Storage {
	if isAccountKey(key) {
		return s.local
	}
	return s.node
}

// String names the storage in logs.
func (s *SplitStorage) String() string { return fmt.Sprintf("scafo(%v, accounts %v)", s.node, s.local) }

func (s *SplitStorage) cached(key string) bool { return s.cache != nil && !isAccountKey(key) }

// Store implements certmagic.Storage.
func (s *SplitStorage) Store(ctx context.Context, key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := s.pick(key).Store(ctx, key, value); err != nil {
		return err
	}
	if s.cached(key) {
		s.cache.Store(ctx, key, value) // best effort: the node holds it
	}
	return nil
}

// Load implements certmagic.Storage.
func (s *SplitStorage) Load(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	v, err := s.pick(key).Load(ctx, key)
	switch {
	case !s.cached(key):
	case err == nil:
		if old, cerr := s.cache.Load(ctx, key); cerr != nil || string(old) != string(v) {
			s.cache.Store(ctx, key, v)
		}
	case unavailable(err):
		if cv, cerr := s.cache.Load(ctx, key); cerr == nil {
			return cv, nil
		}
	case isNotExist(err):
		s.forget(ctx, key)
	}
	return v, err
}

// forget drops a cached value the node answered "not found" for (that answer is
// final: the value must not come back from the cache once no node answers). Only a
// value: a cached directory is left alone (FileStorage deletes one recursively).
func (s *SplitStorage) forget(ctx context.Context, key string) {
	if ki, err := s.cache.Stat(ctx, key); err == nil && ki.IsTerminal {
		s.cache.Delete(ctx, key)
	}
}

// Delete implements certmagic.Storage.
func (s *SplitStorage) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := s.pick(key).Delete(ctx, key); err != nil {
		return err
	}
	if s.cached(key) {
		s.cache.Delete(ctx, key)
	}
	return nil
}

// Exists implements certmagic.Storage.
func (s *SplitStorage) Exists(ctx context.Context, key string) bool {
	if !validKey(key) {
		return false
	}
	if !s.cached(key) {
		return s.pick(key).Exists(ctx, key)
	}
	// Exists hides errors: ask Stat, which says whether the node was reached.
	_, err := s.Stat(ctx, key)
	return err == nil
}

// Stat implements certmagic.Storage.
func (s *SplitStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	if err := checkKey(key); err != nil {
		return certmagic.KeyInfo{}, err
	}
	ki, err := s.pick(key).Stat(ctx, key)
	switch {
	case !s.cached(key):
	case unavailable(err):
		if cki, cerr := s.cache.Stat(ctx, key); cerr == nil {
			return cki, nil
		}
	case isNotExist(err):
		s.forget(ctx, key)
	}
	return ki, err
}

// List implements certmagic.Storage, in FileStorage's order. The root ("") lists both
// sides: the node's keys and the local account keys. A prefix of the node's is listed
// from the cache while no node can be reached. A listed key that is not a clean
// relative path, or not under prefix, is dropped: CertMagic loads and deletes what it
// lists (storage cleaning), so a node must not be able to name a file through a listing.
func (s *SplitStorage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	if prefix != "" {
		if err := checkKey(prefix); err != nil {
			return nil, err
		}
		keys, err := s.pick(prefix).List(ctx, prefix, recursive)
		if unavailable(err) && s.cached(prefix) {
			// No node answers: what this Caddy held (tls.permission.scafo lists the
			// issuers under certificates/ to find a name's certificate).
			if ck, cerr := s.cache.List(ctx, prefix, recursive); cerr == nil {
				keys, err = ck, nil
			}
		}
		return slices.DeleteFunc(keys, func(k string) bool { return !validKey(k) || !strings.HasPrefix(k, prefix+"/") }), err
	}
	keys, err := s.node.List(ctx, "", recursive)
	if err != nil {
		return nil, err
	}
	var local []string
	if recursive {
		local, err = s.local.List(ctx, accountPrefix, true)
		if err == nil {
			local = append(local, accountPrefix)
		}
	} else if s.local.Exists(ctx, accountPrefix) {
		local = []string{accountPrefix}
	}
	if err != nil && !isNotExist(err) {
		return nil, err
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return !validKey(k) || isAccountKey(k) }) // the node side never holds the account
	keys = append(keys, local...)
	// FileStorage's order (a directory walk): segment by segment.
	slices.SortFunc(keys, func(a, b string) int { return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/")) })
	return keys, nil
}

func isNotExist(err error) bool { return err != nil && errors.Is(err, fs.ErrNotExist) }

// Lock implements certmagic.Locker (on the node: the fleet issues each name once).
func (s *SplitStorage) Lock(ctx context.Context, name string) error { return s.node.Lock(ctx, name) }

// Unlock implements certmagic.Locker.
func (s *SplitStorage) Unlock(ctx context.Context, name string) error {
	return s.node.Unlock(ctx, name)
}

// TryLock implements certmagic.TryLocker.
func (s *SplitStorage) TryLock(ctx context.Context, name string) (bool, error) {
	return s.node.TryLock(ctx, name)
}

// RenewLockLease implements certmagic.LockLeaseRenewer.
func (s *SplitStorage) RenewLockLease(ctx context.Context, name string, d time.Duration) error {
	return s.node.RenewLockLease(ctx, name, d)
}

var (
	_ caddy.StorageConverter     = (*Storage)(nil)
	_ caddy.Provisioner          = (*Storage)(nil)
	_ caddyfile.Unmarshaler      = (*Storage)(nil)
	_ certmagic.Storage          = (*SplitStorage)(nil)
	_ certmagic.TryLocker        = (*SplitStorage)(nil)
	_ certmagic.LockLeaseRenewer = (*SplitStorage)(nil)
	_ NodeStorage                = (*storageclient.Client)(nil)
)
