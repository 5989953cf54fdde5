package httpapi

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// expiringSet is a bounded set whose members expire ttl after they were added: the
// least recently added one is dropped beyond size, an expired one reads as absent. It
// starts no goroutine (an expired entry is dropped when read, or pushed out by newer
// ones), unlike golang-lru's expirable.LRU, whose cleaner goroutine never stops
// (TestAPIStartsNoGoroutine).
type expiringSet struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	added *lru.Cache[string, time.Time]
}

func newExpiringSet(size int, ttl time.Duration, now func() time.Time) *expiringSet {
	c, _ := lru.New[string, time.Time](size)
	return &expiringSet{ttl: ttl, now: now, added: c}
}

// Add makes key a member for ttl from now.
func (s *expiringSet) Add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.added.Add(key, s.now())
}

// Contains reports whether key was added less than ttl ago.
func (s *expiringSet) Contains(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.added.Peek(key)
	if ok && s.now().Sub(at) >= s.ttl {
		s.added.Remove(key)
		return false
	}
	return ok
}
