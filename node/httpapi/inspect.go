package httpapi

import "net/http"

// What the node's tests read of the guards' state and drive of their budgets (they run
// a whole node over HTTP, from the root package).

// ConnsHeld is how many connections hold a slot of the connection cap, how many of the
// slots are general (not reserved), and how many general connections source (a
// sourceKey) holds; ok is false before Listen.
func (s *API) ConnsHeld(source string) (open, general, fromSource int, ok bool) {
	l := s.conns.Load()
	if l == nil {
		return 0, 0, 0, false
	}
	l.mu.Lock()
	fromSource = l.bySource[source]
	l.mu.Unlock()
	return l.open(), l.general, fromSource, true
}

// SpendLookupBudgets makes every token-lookup budget (the global one, per source, per
// known token) refuse every take from now on (their buckets forgotten, none refilled).
func (s *API) SpendLookupBudgets() {
	for _, l := range []*writeLimiter{s.lookups, s.sourceLookups, s.knownLookups} {
		l.mu.Lock()
		l.rate, l.burst = 1e-6, 0
		l.buckets.Purge()
		l.mu.Unlock()
	}
}

// TakeSourceLookup takes one token lookup from source's budget (false: spent).
func (s *API) TakeSourceLookup(source string) bool {
	ok, _ := s.sourceLookups.take(source)
	return ok
}

// Authenticate is the write API's authentication in front of next (the route table
// mounts it on the write routes).
func (s *API) Authenticate(next http.Handler) http.Handler { return s.authenticate(next) }
