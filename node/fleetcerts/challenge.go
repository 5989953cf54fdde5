package fleetcerts

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"
	"github.com/scafo/ingress/internal/bucket"
	"github.com/scafo/ingress/render"
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
//   - otherwise the store is read in rounds, one at a time: every request that arrives
//     while a round is in flight waits for the next round, which starts after it arrived
//     (what it reads is at least as new as the request: the CA validates only after the
//     ordering node stored the challenge);
//   - a round lists the pending challenges once (CertMagic keeps one object per name,
//     under one prefix) and reads only the objects of the names its requests ask about
//     that are listed: junk for any number of names costs one listing per round, so
//     the names a flood spreads over do not compete with the CA's name for the bucket
//     (one store read per name and request did: junk across a thousand public names
//     left the CA's read a token within challengeWait about one time in four);
//   - a round waits for the bucket rather than being refused (at most challengeWait),
//     so the bound on store reads holds, and the CA's request is answered by the first
//     round after it arrived.

// challengeWait bounds how long a challenge request waits for its round.
const challengeWait = 5 * time.Second

// chalRound is one round of store reads, shared by the requests that wait for it.
type chalRound struct {
	done  chan struct{}
	hosts map[string]bool            // the names its requests ask about (fixed once it runs)
	chals map[string]*acme.Challenge // the challenges pending for them (absent: none, or unreadable)
}

// challengeLookups runs the rounds: the one running and the one queued behind it.
type challengeLookups struct {
	mu              sync.Mutex
	running, queued *chalRound
}

// lookupChallenge returns the challenge pending for host, from a round that started
// after this call, or nil (none, or ctx ended first).
func (m *Manager) lookupChallenge(ctx context.Context, host string) *acme.Challenge {
	c := &m.chal
	c.mu.Lock()
	var rd *chalRound
	switch {
	case c.running == nil:
		rd = &chalRound{done: make(chan struct{}), hosts: map[string]bool{host: true}}
		c.running = rd
		go m.runRounds(rd)
	case c.queued == nil:
		rd = &chalRound{done: make(chan struct{}), hosts: map[string]bool{host: true}}
		c.queued = rd
	default:
		rd = c.queued
		rd.hosts[host] = true
	}
	c.mu.Unlock()
	select {
	case <-rd.done:
		return rd.chals[host]
	case <-ctx.Done():
		return nil
	}
}

// runRounds runs rd, then the round queued behind it, if any.
func (m *Manager) runRounds(rd *chalRound) {
	for rd != nil {
		rd.chals = m.loadChallenges(rd.hosts) // rd.hosts no longer changes: rd runs
		close(rd.done)
		c := &m.chal
		c.mu.Lock()
		rd, c.queued = c.queued, nil
		c.running = rd
		c.mu.Unlock()
	}
}

// loadChallenges reads the challenges pending for hosts from the store: one listing,
// then one read per host listed, each waiting for the bucket, all within challengeWait.
// A host absent from the result has none (or it cannot be read: CertMagic's own handler
// would answer nothing either).
func (m *Manager) loadChallenges(hosts map[string]bool) map[string]*acme.Challenge {
	ctx, cancel := context.WithTimeout(context.Background(), challengeWait)
	defer cancel()
	out := map[string]*acme.Challenge{}
	if !m.lookups.wait(ctx) {
		return out
	}
	// CertMagic's distributed solver's keys (solvers.go, challengeTokensKey): one object
	// per name, under the issuer's prefix.
	dir := path.Join("acme", certmagic.StorageKeys.Safe(m.issuer.IssuerKey()), "challenge_tokens")
	keys, err := m.store.List(ctx, dir, false)
	if err != nil {
		return out // none pending (fs.ErrNotExist), or the store cannot say
	}
	listed := make(map[string]bool, len(keys))
	for _, k := range keys {
		listed[path.Base(k)] = true
	}
	for host := range hosts {
		name := certmagic.StorageKeys.Safe(host) + ".json"
		if !listed[name] || !m.lookups.wait(ctx) {
			continue
		}
		b, err := m.store.Load(ctx, path.Join(dir, name))
		if err != nil || len(b) == 0 {
			continue
		}
		var ch acme.Challenge
		if json.Unmarshal(b, &ch) == nil {
			out[host] = &ch
		}
	}
	return out
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
		case <-time.After(time.Duration(float64(time.Second) / b.b.Rate())):
		}
	}
}

// HandleChallenge answers GET /.well-known/acme-challenge/<token> for a name the fleet
// issues, from memory when this process started the challenge, else from the store
// (any node answers any node's challenge). Anonymous and bounded: the token must be
// base64url, the Host a name this node knows the fleet issues (no store read for any
// other), and store reads are one per host at a time within a rate limit, waited for
// rather than refused, so a flood of junk tokens cannot crowd the CA out
// (challenge.go); everything else is 404. It reports whether it answered.
func (m *Manager) HandleChallenge(w http.ResponseWriter, r *http.Request) bool {
	token, ok := strings.CutPrefix(r.URL.Path, render.ACMEChallengePath)
	if !ok || token == "" || len(token) > 256 || !base64URL(token) || r.Method != http.MethodGet || m.issuer == nil {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	m.mu.Lock()
	known := m.wanted[host]
	m.mu.Unlock()
	if !known {
		return false
	}
	if _, mine := certmagic.GetACMEChallenge(host); mine {
		// Started by this process: CertMagic answers from memory, no store read.
		return m.issuer.HandleHTTPChallenge(w, r)
	}
	// From the store, one read per host at a time, bounded by the bucket (challenge.go).
	ctx, cancel := context.WithTimeout(r.Context(), challengeWait)
	defer cancel()
	return m.answerChallenge(w, r, host, m.lookupChallenge(ctx, host))
}

func base64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// tokenBucket is a small rate limiter (rate per second, burst), safe for concurrent use.
type tokenBucket struct {
	mu sync.Mutex
	b  bucket.Bucket
}

func newTokenBucket(rate, burst float64) *tokenBucket {
	return &tokenBucket{b: bucket.New(rate, burst)}
}

func (b *tokenBucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ok, _ := b.b.Take(now)
	return ok
}
