package httpapi

import "testing"

// Hostile round six: what the connection reserve admits, by path (the routes' reserve
// attribute): health probes and the applied callback without a token, polls and status
// with one, nothing else; the callback's prefix wins over the polls' /v1/ingress/{format}.
func TestReserveRouteByPath(t *testing.T) {
	table := testAPI(t, Config{}, Deps{}).table
	for path, want := range map[string]reserveKind{
		"/v1/healthz":                           reserveAnyone,
		"/v1/readyz":                            reserveAnyone,
		"/v1/health/instances/shop":             reserveAnyone,
		"/v1/ingress/applied/edge/0a/0b":        reserveAnyone,
		"/v1/ingress/applied/":                  reserveAnyone,
		"/v1/ingress/applied":                   reserveIngress, // the format "applied": a poll (404)
		"/v1/ingress/traefik":                   reserveIngress,
		"/v1/ingress/routes":                    reserveIngress,
		"/v1/status":                            reserveIngress,
		"/v1/statusx":                           reserveNo,
		"/v1/apps/shop":                         reserveNo,
		"/v1/node/instances/shop":               reserveNo,
		"/v1/storage/keys/x":                    reserveNo,
		"/metrics":                              reserveNo,
		"/.well-known/acme-challenge/t":         reserveNo,
		"/v1/tokens":                            reserveNo,
		"/v1/healthzx":                          reserveNo,
		"/v1/apps/shop/domains/x.example/paths": reserveNo,
	} {
		if got := table.reserve(path); got != want {
			t.Errorf("reserve(%q) = %d, want %d", path, got, want)
		}
	}
}
