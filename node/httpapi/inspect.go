package httpapi

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

// SpendLookupBudgets makes every token's lookup budget refuse every take from now on
// (its buckets forgotten, none refilled).
func (s *API) SpendLookupBudgets() {
	l := s.knownLookups
	l.mu.Lock()
	l.rate, l.burst = 1e-6, 0
	l.buckets.Purge()
	l.mu.Unlock()
}
