package testnode

import (
	"encoding/json"
	"testing"
)

// PathsURL is the path map of ti.to, the domain FleetOf claims for its first
// application (tito-classic in the tests that use it).
const PathsURL = "/v1/apps/tito-classic/domains/ti.to/paths"

// APINodes is the node names of a routing document's API upstreams.
func APINodes(t testing.TB, body []byte) []string {
	t.Helper()
	var d struct {
		API *struct {
			Upstreams []struct {
				Node string `json:"node"`
			} `json:"upstreams"`
		} `json:"api"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("document: %v: %s", err, body)
	}
	var names []string
	if d.API != nil {
		for _, u := range d.API.Upstreams {
			names = append(names, u.Node)
		}
	}
	return names
}
