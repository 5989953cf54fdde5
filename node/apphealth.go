package node

import "github.com/scafo/ingress/render/routing"

// appHealthPath is app's health path from the last derivation's applications, for the
// incarnation appID ("" when none is declared, the application is unknown yet, or the
// path is invalid: such an instance is probed over TCP).
func appHealthPath(apps appView, app, appID string) string {
	a, ok := apps.get(app)
	if !ok || a.Health == nil || a.Health.Path == "" || (appID != "" && a.ID != "" && a.ID != appID) {
		return ""
	}
	if routing.ValidateHealthPath("health.path", a.Health.Path) != nil {
		return ""
	}
	return a.Health.Path
}
