package fleetwrite

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// The applied probe's MAC (docs/design.md §11): the callback path an HTTP-provider
// Traefik is served names its ingress and revision and carries HMAC-SHA256 over both,
// keyed with the fleet's token MAC key (TokenMACKey) under a label of its own, so any
// node renders the same bytes and a callback forged or altered is refused without a
// store read.

// appliedMACHex is the MAC's length in hex (128 bits).
const appliedMACHex = 32

func (m *tokenMAC) applied(ingress, revision string) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte("scafo-applied\x00" + ingress + "\x00" + revision))
	return hex.EncodeToString(h.Sum(nil))[:appliedMACHex]
}

// AppliedMAC is the MAC of ingress's callback for revision; ok is false when no key is
// usable (the store unreachable, the key object corrupt). It loads (or creates) the key
// on first use, like CheckToken: callers are ingress-token polls.
func (w *Writer) AppliedMAC(ctx context.Context, ingress, revision string) (mac string, ok bool) {
	m := w.macKey(ctx, false)
	if m == nil {
		return "", false
	}
	return m.applied(ingress, revision), true
}

// VerifyAppliedMAC reports whether mac is ingress's callback MAC for revision, with the
// key this node has cached: never a store read (the callback is anonymous; a node that
// has no key cached has served no probe body either).
func (w *Writer) VerifyAppliedMAC(ingress, revision, mac string) bool {
	w.mac.mu.Lock()
	m := w.mac.cur
	w.mac.mu.Unlock()
	if m == nil || len(mac) != appliedMACHex {
		return false
	}
	return hmac.Equal([]byte(m.applied(ingress, revision)), []byte(mac))
}
