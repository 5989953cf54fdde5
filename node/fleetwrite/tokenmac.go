package fleetwrite

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
)

// TokenMACKey is the store key of the fleet's token MAC key (docs/security.md,
// "Forged tokens"): one object, created once, with a conditional create, by whichever
// node first needs it, read once per node and cached. It is not under tokens/ (that
// prefix holds one record per token) and no reconcile pass reads it.
const TokenMACKey = "tokenkey"

// An application token minted with the MAC key keeps the shape every client knows,
// "scafo_" + 16 hex id + "_" + 64 hex secret, but its secret is 48 hex random and 16 hex
// of HMAC-SHA256(key, "scafo-token\x00" + id + "_" + random): a node tells a token the
// fleet issued from a made-up one without a store read.
const (
	macRandomHex = 48
	macHex       = 16
)

// macRetry is how soon a node tries again to read a key object it could not read or
// decode; macRecheck, how often at most a token that does not verify makes it check
// that the key object is still the one it cached (a conditional GET: the key may have
// been deleted and created anew by another node). Neither is a per-tick cost: both
// happen only while tokens are presented.
const (
	macRetry   = 30 * time.Second
	macRecheck = 10 * time.Second
	// macLoadTimeout bounds one load of the key, which no caller can cancel.
	macLoadTimeout = 10 * time.Second
)

// tokenMACObject is the stored form of the key. A token is good only with the key it
// was minted with: losing the key object means reissuing every application token
// (docs/security.md).
type tokenMACObject struct {
	Key string `json:"key"`
}

type tokenMAC struct {
	key  []byte
	etag string
}

// errMACCorrupt: the key object exists but is not a key (wrong size, garbage).
var errMACCorrupt = errors.New("token MAC key object is corrupt")

func parseTokenMAC(obj store.Object) (*tokenMAC, error) {
	var o tokenMACObject
	if err := json.Unmarshal(obj.Value, &o); err != nil {
		return nil, fmt.Errorf("%w: %v", errMACCorrupt, err)
	}
	key, err := hex.DecodeString(o.Key)
	if err != nil || len(key) != 32 || strings.ToLower(o.Key) != o.Key {
		return nil, fmt.Errorf("%w: key: want 64 lowercase hex characters", errMACCorrupt)
	}
	return &tokenMAC{key: key, etag: obj.ETag}, nil
}

func (m *tokenMAC) sum(id, random string) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte("scafo-token\x00" + id + "_" + random))
	return hex.EncodeToString(h.Sum(nil))[:macHex]
}

// verifies reports whether the secret of token id carries m's MAC.
func (m *tokenMAC) verifies(id, secret string) bool {
	if len(secret) != macRandomHex+macHex {
		return false
	}
	return hmac.Equal([]byte(m.sum(id, secret[:macRandomHex])), []byte(secret[macRandomHex:]))
}

// macCache is a node's copy of the key (Writer.mac).
type macCache struct {
	mu      sync.Mutex
	cur     *tokenMAC
	broken  bool      // the last read found a corrupt object
	logged  bool      // the corrupt object was logged (once)
	lastTry time.Time // the last failed load
	checkMu sync.Mutex
	checked time.Time // the last recheck of a cached key
}

// TokenCheck is what the MAC key says of a presented application token.
type TokenCheck int

const (
	// TokenNoKey: no usable key (the store was unreachable, or the key object is
	// corrupt): the token cannot be told from a made-up one; refuse it as unavailable.
	TokenNoKey TokenCheck = iota
	// TokenSigned: its MAC verifies: the fleet issued it; look it up on its own budget.
	TokenSigned
	// TokenForged: it does not verify: refuse it without a store read.
	TokenForged
)

// CheckToken tells a presented token ("scafo_<id>_<secret>", already shaped like one)
// the fleet issued from a made-up one, without a store read once the key is cached. The
// first call on a node reads the key (creating it when the store has none); a corrupt
// key object or an unreachable store never refuses a token: the answer is TokenNoKey.
func (w *Writer) CheckToken(ctx context.Context, tok string) TokenCheck {
	rest, _ := strings.CutPrefix(tok, "scafo_")
	id, secret, _ := strings.Cut(rest, "_")
	m := w.macKey(ctx, false)
	if m == nil {
		return TokenNoKey
	}
	if m.verifies(id, secret) {
		return TokenSigned
	}
	// The key object may have been replaced since it was cached (deleted, then created
	// anew): look, at most once per macRecheck, whoever asks.
	if m2 := w.recheckMAC(ctx, m); m2 != nil && m2 != m && m2.verifies(id, secret) {
		return TokenSigned
	}
	return TokenForged
}

// macKey returns the cached key, loading (or creating) it when there is none and the
// last failed attempt is older than macRetry (or force); nil when none is usable.
func (w *Writer) macKey(ctx context.Context, force bool) *tokenMAC {
	c := &w.mac
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		return c.cur
	}
	if !force && !c.lastTry.IsZero() && w.now().Sub(c.lastTry) < macRetry {
		return nil
	}
	// The key is the node's, not the caller's: it is read on a context of the node's
	// own, so a client that gives up on its request (a made-up token, half-closed right
	// after it is sent) cannot fail the load and switch the MAC check off for everyone
	// until macRetry (TestAClientsCancellationDoesNotFailTheTokenKeyLoad).
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), macLoadTimeout)
	defer cancel()
	m, err := w.loadTokenMAC(lctx)
	switch {
	case err == nil:
		c.cur, c.broken, c.lastTry = m, false, time.Time{}
		return m
	case errors.Is(err, errMACCorrupt):
		if !c.logged {
			w.log.Error("the token MAC key object is corrupt: every application token is refused (503), and no token is issued, until it is deleted (the next node that needs one creates a new key; every application token must then be reissued)",
				"key", TokenMACKey, "err", err)
			c.logged = true
		}
		c.broken = true
	default:
		w.log.Warn("reading the token MAC key; application tokens are refused (503) meanwhile", "err", err)
	}
	c.lastTry = w.now()
	return nil
}

// TokenMACBroken reports whether the last read of the key object found it corrupt.
func (w *Writer) TokenMACBroken() bool {
	w.mac.mu.Lock()
	defer w.mac.mu.Unlock()
	return w.mac.broken
}

// recheckMAC reads the key object again if it changed (a conditional GET), at most once
// per macRecheck; it returns the key now cached.
func (w *Writer) recheckMAC(ctx context.Context, m *tokenMAC) *tokenMAC {
	c := &w.mac
	if !c.checkMu.TryLock() {
		return m
	}
	defer c.checkMu.Unlock()
	if now := w.now(); now.Sub(c.checked) < macRecheck {
		return m
	} else {
		c.checked = now
	}
	obj, changed, err := w.st.GetIfChanged(ctx, TokenMACKey, m.etag)
	if errors.Is(err, store.ErrNotFound) {
		// Deleted: the next node that needs a key creates one. Keep this one (its
		// tokens are good) until then.
		return m
	}
	if err != nil || !changed {
		return m
	}
	m2, err := parseTokenMAC(obj)
	if err != nil {
		return m
	}
	c.mu.Lock()
	c.cur = m2
	c.mu.Unlock()
	return m2
}

// loadTokenMAC reads the key object, creating it (create-only) when absent.
func (w *Writer) loadTokenMAC(ctx context.Context) (*tokenMAC, error) {
	for range 3 {
		obj, err := w.st.Get(ctx, TokenMACKey)
		if err == nil {
			return parseTokenMAC(obj)
		}
		if errors.Is(err, store.ErrTooLarge) {
			return nil, fmt.Errorf("%w: %v", errMACCorrupt, err)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if w.id != nil && w.id.Foreign() {
			return nil, fmt.Errorf("not creating the token MAC key: %w", store.ErrForeign)
		}
		b, _ := jsonx.Marshal(tokenMACObject{Key: randomHexN(32)})
		etag, err := w.st.Put(ctx, TokenMACKey, b, store.Condition{IfNoneMatch: true})
		if errors.Is(err, store.ErrPreconditionFailed) {
			continue // another node created it first: read theirs
		}
		if err != nil {
			return nil, err
		}
		w.log.Info("created the token MAC key", "key", TokenMACKey)
		return parseTokenMAC(store.Object{Key: TokenMACKey, Value: b, ETag: etag})
	}
	return nil, fmt.Errorf("creating the token MAC key: lost the create race three times: %w", store.ErrUnavailable)
}

// issueKey is the key new tokens are minted with: the cached one, checked to still be
// the stored one (a conditional GET; issuing is rare), so a token is never minted with
// a key another node replaced. A corrupt key object refuses issuing (503): a token
// minted without a MAC now would be refused by every node holding the key.
func (w *Writer) issueKey(ctx context.Context) (*tokenMAC, error) {
	m := w.macKey(ctx, true)
	if m != nil {
		obj, changed, err := w.st.GetIfChanged(ctx, TokenMACKey, m.etag)
		switch {
		case err == nil && !changed:
			return m, nil
		case err == nil:
			m2, perr := parseTokenMAC(obj)
			if perr != nil {
				return nil, fmt.Errorf("token MAC key object %s: %v: %w", TokenMACKey, perr, store.ErrUnavailable)
			}
			w.mac.mu.Lock()
			w.mac.cur = m2
			w.mac.mu.Unlock()
			return m2, nil
		case errors.Is(err, store.ErrNotFound):
			w.mac.mu.Lock()
			w.mac.cur = nil
			w.mac.mu.Unlock()
			if m = w.macKey(ctx, true); m != nil {
				return m, nil
			}
		default:
			return nil, fmt.Errorf("reading the token MAC key: %w", err)
		}
	}
	if w.TokenMACBroken() {
		return nil, fmt.Errorf("the token MAC key object %s is corrupt; delete it (a node creates a new one; every application token must then be reissued): %w", TokenMACKey, store.ErrUnavailable)
	}
	return nil, fmt.Errorf("reading the token MAC key: %w", store.ErrUnavailable)
}

func randomHexN(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
