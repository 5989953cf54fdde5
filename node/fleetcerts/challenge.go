package fleetcerts

import (
	"context"
	"encoding/json"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"
)

// Answering HTTP-01 challenges from the store, under an anonymous flood.
//
// The route is anonymous (the CA asks) and any node answers any node's challenge from
// the store, so store reads are bounded (lookups: 50/s, burst 100). A bound that refuses
// once spent would let anyone who sends junk tokens faster than that make every node
// refuse the CA's own validation requests, and so stop every issuance and renewal of the
// fleet. Instead:
//
//   - a challenge this process started is answered from memory (no store read);
//   - otherwise the store is read once per host at a time: the challenge object is per
//     host (CertMagic keeps one pending challenge per name), so every request that
//     arrives while a read of its host is in flight waits for the next read, which
//     starts after it arrived (the object it reads is at least as new as the request:
//     the CA validates only after the ordering node stored the challenge);
//   - a read waits for the bucket rather than being refused (at most challengeWait),
//     so the bound on store reads holds, junk for one host costs one read per round,
//     and the CA's request is answered by the first read after it arrived.

// challengeWait bounds how long a challenge request waits for its host's store read.
const challengeWait = 5 * time.Second

// chalRead is one store read of a host's pending challenge, shared by the requests
// that wait for it.
type chalRead struct {
	done chan struct{}
	chal *acme.Challenge // nil: none pending (or unreadable)
}

// chalHost is a host's reads: the one running and the one queued behind it.
type chalHost struct {
	running, queued *chalRead
}

// challengeLookups coalesces the store reads of challenge requests per host.
type challengeLookups struct {
	mu    sync.Mutex
	hosts map[string]*chalHost
}

// lookupChallenge returns the challenge pending for host, from a store read that
// started after this call, or nil (none, or ctx ended first).
func (m *Manager) lookupChallenge(ctx context.Context, host string) *acme.Challenge {
	c := &m.chal
	c.mu.Lock()
	if c.hosts == nil {
		c.hosts = map[string]*chalHost{}
	}
	h := c.hosts[host]
	if h == nil {
		h = &chalHost{}
		c.hosts[host] = h
	}
	var rd *chalRead
	switch {
	case h.running == nil:
		rd = &chalRead{done: make(chan struct{})}
		h.running = rd
		go m.readChallenge(host, h, rd)
	case h.queued == nil:
		rd = &chalRead{done: make(chan struct{})}
		h.queued = rd
	default:
		rd = h.queued
	}
	c.mu.Unlock()
	select {
	case <-rd.done:
		return rd.chal
	case <-ctx.Done():
		return nil
	}
}

// readChallenge runs rd for host, then the read queued behind it, if any.
func (m *Manager) readChallenge(host string, h *chalHost, rd *chalRead) {
	for rd != nil {
		rd.chal = m.loadChallenge(host)
		close(rd.done)
		c := &m.chal
		c.mu.Lock()
		rd, h.queued = h.queued, nil
		h.running = rd
		if rd == nil {
			delete(c.hosts, host)
		}
		c.mu.Unlock()
	}
}

// loadChallenge reads host's pending challenge from the store, waiting for the bucket
// for at most challengeWait. nil when there is none (or it cannot be read: CertMagic's
// own handler would answer nothing either).
func (m *Manager) loadChallenge(host string) *acme.Challenge {
	ctx, cancel := context.WithTimeout(context.Background(), challengeWait)
	defer cancel()
	if !m.lookups.wait(ctx) {
		return nil
	}
	// CertMagic's distributed solver's key (solvers.go, challengeTokensKey): one object
	// per name, under the issuer's prefix.
	key := path.Join("acme", certmagic.StorageKeys.Safe(m.issuer.IssuerKey()), "challenge_tokens",
		certmagic.StorageKeys.Safe(host)+".json")
	b, err := m.store.Load(ctx, key)
	if err != nil || len(b) == 0 {
		return nil
	}
	var ch acme.Challenge
	if json.Unmarshal(b, &ch) != nil {
		return nil
	}
	return &ch
}

// answerChallenge answers r with ch's key authorization when ch is r's challenge (its
// path and its name, as CertMagic's own solver checks), and logs it as CertMagic does.
func (m *Manager) answerChallenge(w http.ResponseWriter, r *http.Request, host string, ch *acme.Challenge) bool {
	if ch == nil || ch.Token == "" || r.URL.Path != ch.HTTP01ResourcePath() || !strings.EqualFold(host, ch.Identifier.Value) {
		return false
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write([]byte(ch.KeyAuthorization))
	m.log.Info("served key authentication", "identifier", ch.Identifier.Value, "challenge", "http-01",
		"remote", r.RemoteAddr, "distributed", true)
	return true
}

// wait takes a token, waiting for one until ctx ends; false when it ended first.
func (b *tokenBucket) wait(ctx context.Context) bool {
	for {
		if b.take(time.Now()) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(float64(time.Second) / b.rate)):
		}
	}
}
