package reconcile

import "sync/atomic"

// Apps is the applications of the last derivation (the reconciler's KnownApps), for
// readers built before the reconciler (the prober's health paths): the root builds it,
// hands it to the prober and to New (Options.Apps), and the reconciler stores every
// derivation's view in it.
type Apps struct{ v atomic.Pointer[AppView] }

// Get is the last derivation's view (nil before one).
func (a *Apps) Get() AppView {
	if v := a.v.Load(); v != nil {
		return *v
	}
	return nil
}

// HealthPath is AppView.HealthPath over the last derivation's view.
func (a *Apps) HealthPath(app, appID string) string { return a.Get().HealthPath(app, appID) }

func (a *Apps) set(v AppView) {
	if a != nil {
		a.v.Store(&v)
	}
}
