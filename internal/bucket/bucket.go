// Package bucket is the one token bucket behind every rate limit of the node: write
// budgets per application token, token lookups, ingress report writes, the ACME
// challenge's store reads.
package bucket

import "time"

// Bucket refills rate tokens a second up to burst, and is full at its first use. It is
// not safe for concurrent use: its owner holds the lock that guards it.
type Bucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time // zero before the first Take
}

// New returns a full bucket of burst tokens refilled at rate a second.
func New(rate, burst float64) Bucket {
	return Bucket{rate: rate, burst: burst, tokens: burst}
}

// Rate is the bucket's refill rate (tokens a second).
func (b *Bucket) Rate() float64 { return b.rate }

// Take spends one token at now. When none is left it spends nothing and returns how
// long until one is.
func (b *Bucket) Take(now time.Time) (ok bool, retry time.Duration) {
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}
