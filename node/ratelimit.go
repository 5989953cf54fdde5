package node

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// writeLimiter is a token bucket per application token: a tenant's CI or router may
// write in bursts, but cannot fill the store with audit rows or churn every Traefik.
// The admin is not limited (the operator's own credential). Buckets live in a bounded
// LRU, so many tokens cannot grow memory either.
type writeLimiter struct {
	rate  float64 // tokens per second
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets *lru.Cache[string, *bucket]
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newWriteLimiter(rate float64, burst int) *writeLimiter {
	c, _ := lru.New[string, *bucket](16384)
	return &writeLimiter{rate: rate, burst: float64(burst), now: time.Now, buckets: c}
}

// take spends one write for key; when none is left it returns how long until one is.
func (l *writeLimiter) take(key string) (ok bool, retry time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, found := l.buckets.Get(key)
	if !found {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets.Add(key, b)
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// limitWrites answers 429 with Retry-After to an application token past its write
// budget. Reads are not counted.
func (s *Server) limitWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := actorOf(r)
		if r.Method == http.MethodGet || r.Method == http.MethodHead || a.Admin {
			next.ServeHTTP(w, r)
			return
		}
		if ok, retry := s.writes.take(a.Token.ID); !ok {
			secs := int(math.Ceil(retry.Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			writeError(w, http.StatusTooManyRequests, "too many writes",
				"token "+a.Token.ID+" is past writes.rate; retry after "+strconv.Itoa(max(secs, 1))+"s")
			return
		}
		next.ServeHTTP(w, r)
	})
}
