package httpapi

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/scafo/ingress/internal/bucket"
	"github.com/scafo/ingress/node/fleetwrite"
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
	buckets *lru.Cache[string, *bucket.Bucket]
}

func newWriteLimiter(rate float64, burst int) *writeLimiter {
	c, _ := lru.New[string, *bucket.Bucket](16384)
	return &writeLimiter{rate: rate, burst: float64(burst), now: time.Now, buckets: c}
}

// take spends one write for key; when none is left it returns how long until one is.
func (l *writeLimiter) take(key string) (ok bool, retry time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, found := l.buckets.Get(key)
	if !found {
		nb := bucket.New(l.rate, l.burst)
		b = &nb
		l.buckets.Add(key, b)
	}
	return b.Take(l.now())
}

// writeGuard is writes.rate: the write budget of each application token.
type writeGuard struct {
	writes  *writeLimiter
	refused *refusals
}

// limit answers 429 with Retry-After to an application token past its write budget.
// Reads are not counted.
func (g *writeGuard) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := actorOf(r)
		if r.Method == http.MethodGet || r.Method == http.MethodHead || a.Admin {
			next.ServeHTTP(w, r)
			return
		}
		if ok, retry := g.writes.take(a.Token.ID); !ok {
			g.refused.count(RefusedWriteRate)
			secs := strconv.Itoa(fleetwrite.RetrySeconds(retry))
			w.Header().Set("Retry-After", secs)
			writeError(w, http.StatusTooManyRequests, "too many writes",
				"token "+a.Token.ID+" is past writes.rate; retry after "+secs+"s")
			return
		}
		next.ServeHTTP(w, r)
	})
}
