package testnode

import "testing"

// UpstreamsOf is the addresses n's document routes host to, in order.
func UpstreamsOf(t testing.TB, n *Node, host string) []string {
	t.Helper()
	var out []string
	for _, r := range RoutesDoc(t, n)["routes"].([]any) {
		rm := r.(map[string]any)
		if rm["host"] != host {
			continue
		}
		ups, _ := rm["upstreams"].([]any)
		for _, u := range ups {
			out = append(out, u.(map[string]any)["address"].(string))
		}
	}
	return out
}
