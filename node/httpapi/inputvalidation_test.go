package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// Issue 25 items 9 and 10: rules each given a direct test.

// An ingress name must start and end with a letter or digit: a name ending in "-" or
// "." is refused like one starting so (the edge test sent "-edge" only), and so are
// the other malformed names; the poll is served either way.
func TestIngressNamesAreCheckedAtBothEnds(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	for _, name := range []string{"edge-", "edge.", "-edge", ".edge", "Edge", "ed_ge", strings.Repeat("a", 64), "-"} {
		resp, b := n.Get("/v1/ingress/traefik", ipIngress, api.HeaderIngress, name)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: the poll answered %d %s, want it served", name, resp.StatusCode, b)
		}
		if h := resp.Header.Get(api.HeaderIngressReport); !strings.HasPrefix(h, "refused") || !strings.Contains(h, api.HeaderIngress) {
			t.Errorf("%q: %s %q, want refused naming %s", name, api.HeaderIngressReport, h, api.HeaderIngress)
		}
	}
	for _, name := range []string{"e", "edge-1", "edge.a-b.c", strings.Repeat("a", 63)} {
		resp, _ := n.Get("/v1/ingress/traefik", ipIngress, api.HeaderIngress, name)
		if h := resp.Header.Get(api.HeaderIngressReport); h != "recorded" {
			t.Errorf("%q: %s %q, want recorded", name, api.HeaderIngressReport, h)
		}
	}
}

// Issue 25 item 9: a corrupt application object (bytes that do not decode) answers the
// admin's GET with 409 "corrupt object", saying what to do, instead of 500; the admin
// can DELETE it (conditionally on the bytes there); then it is gone.
func TestACorruptApplicationObjectCanBeSeenAndDeleted(t *testing.T) {
	t.Parallel()
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), "apps/broken.json", []byte(`{"name":"broken","account":`), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	n := newInProcessOn(t, st, nil)
	resp, b := n.Do("GET", "/v1/apps/broken", ipAdmin, "")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "corrupt object") || !strings.Contains(string(b), "apps/broken.json") {
		t.Errorf("GET of a corrupt application: %d %s, want 409 corrupt object naming the key", resp.StatusCode, b)
	}
	if resp, b := n.Do("DELETE", "/v1/apps/broken", ipAdmin, "", "If-Match", `"not-its-etag"`); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("DELETE with another etag: %d %s, want 412 (the delete stays conditional)", resp.StatusCode, b)
	}
	if resp, b := n.Do("DELETE", "/v1/apps/broken", ipAdmin, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE of a corrupt application: %d %s, want 200", resp.StatusCode, b)
	}
	if resp, b := n.Do("GET", "/v1/apps/broken", ipAdmin, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after the delete: %d %s, want 404", resp.StatusCode, b)
	}
}
