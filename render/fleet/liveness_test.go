package fleet

import (
	"testing"
	"time"
)

// TestNodeLiveIsTheTTLWindowAroundSeen: a record is live while this node's clock is
// within the TTL of its seen on either side; past it, or ahead of it by more than the
// TTL, it is not, and only the latter is "ahead".
func TestNodeLiveIsTheTTLWindowAroundSeen(t *testing.T) {
	now := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	const ttl = time.Minute
	for _, tc := range []struct {
		name     string
		seen     time.Time
		ttl      time.Duration
		live     bool
		ahead    bool
		wantSkew time.Duration
	}{
		{"now", now, ttl, true, false, 0},
		{"past within ttl", now.Add(-59 * time.Second), ttl, true, false, -59 * time.Second},
		{"past at ttl", now.Add(-ttl), ttl, true, false, -ttl},
		{"past beyond ttl", now.Add(-ttl - time.Millisecond), ttl, false, false, -ttl - time.Millisecond},
		{"ahead within ttl", now.Add(30 * time.Second), ttl, true, false, 30 * time.Second},
		{"ahead at ttl", now.Add(ttl), ttl, true, false, ttl},
		{"ahead beyond ttl", now.Add(ttl + time.Millisecond), ttl, false, true, ttl + time.Millisecond},
		{"a year ahead", now.Add(8760 * time.Hour), ttl, false, true, 8760 * time.Hour},
		{"never seen", time.Time{}, ttl, false, false, time.Time{}.Sub(now)},
		{"no ttl, old", now.Add(-8760 * time.Hour), 0, true, false, -8760 * time.Hour},
		{"no ttl, ahead", now.Add(8760 * time.Hour), 0, true, false, 8760 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeLive(tc.seen, now, tc.ttl); got != tc.live {
				t.Errorf("NodeLive = %v, want %v", got, tc.live)
			}
			ahead, skew := NodeAhead(tc.seen, now, tc.ttl)
			if ahead != tc.ahead || skew != tc.wantSkew {
				t.Errorf("NodeAhead = %v, %s; want %v, %s", ahead, skew, tc.ahead, tc.wantSkew)
			}
		})
	}
}
