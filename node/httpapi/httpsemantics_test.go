package httpapi_test

// HTTP semantics (issue 12 item 13): HEAD on the read endpoints; If-Match as RFC 9110
// has it ("*" matches any current representation; strong comparison, so a weak tag
// never matches).

import (
	"net/http"
	"strings"
	"testing"
)

// TestHeadOnReadEndpoints: HEAD answers what GET answers (status and headers). That no
// body follows is Go's server's doing (it discards a HEAD's body), not the handlers'.
func TestHeadOnReadEndpoints(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	n.fleetOf("tito-classic")
	cases := []struct {
		path, token string
		hdr         []string
	}{
		{"/v1/healthz", "", nil},
		{"/v1/readyz", "", nil},
		{"/v1/status", ipIngress, nil},
		{"/v1/ingress/routes", ipIngress, nil},
		{"/v1/ingress/traefik", ipIngress, nil},
		{"/v1/ingress/traefik", ipIngress, []string{"Accept-Encoding", "gzip"}},
		{"/v1/ingress/routes", "", nil}, // 401 both ways
	}
	for _, c := range cases {
		get, gbody := n.Get(c.path, c.token, c.hdr...)
		head, _ := n.Do(http.MethodHead, c.path, c.token, "", c.hdr...)
		if head.StatusCode != get.StatusCode {
			t.Errorf("HEAD %s: %d, GET %d", c.path, head.StatusCode, get.StatusCode)
			continue
		}
		for _, h := range []string{"Content-Type", "Content-Length", "ETag", "Content-Encoding", "X-Scafo-Revision", "X-Scafo-Serial", "X-Scafo-Epoch", "Cache-Control", "Vary", "WWW-Authenticate"} {
			if g, hd := get.Header.Get(h), head.Header.Get(h); g != hd && !(h == "Content-Length" && hd == "") {
				t.Errorf("HEAD %s: %s %q, GET %q", c.path, h, hd, g)
			}
		}
		if cl := head.Header.Get("Content-Length"); cl != "" && cl != get.Header.Get("Content-Length") {
			t.Errorf("HEAD %s: Content-Length %s, GET sent %d bytes", c.path, cl, len(gbody))
		}
	}
	// HEAD with If-None-Match: 304, like GET.
	get, _ := n.Get("/v1/ingress/routes", ipIngress)
	head, _ := n.Do(http.MethodHead, "/v1/ingress/routes", ipIngress, "", "If-None-Match", get.Header.Get("ETag"))
	if head.StatusCode != http.StatusNotModified {
		t.Errorf("HEAD with a matching If-None-Match: %d, want 304", head.StatusCode)
	}
}

// TestIfMatchStarAndStrongComparison: "If-Match: *" proceeds when the object exists and
// is 412 when it does not, and W/"<current etag>" is 412 and writes nothing (the strong
// comparison), while a list matches when any strong member does: for applications,
// claims and path maps.
func TestIfMatchStarAndStrongComparison(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	n.fleetOf("tito-classic", "tito-go")
	star := []string{"If-Match", "*"}
	etag := func(path string) string {
		r, _ := n.Do("GET", path, ipAdmin, "")
		if e := r.Header.Get("ETag"); strings.HasPrefix(e, `"`) {
			return e
		}
		t.Fatalf("%s: ETag %q is not a strong tag", path, r.Header.Get("ETag"))
		return ""
	}
	const app, claim, paths = `{"account":"acme","placement":["vps-a"],"health":{"path":"/h"}}`, "/v1/apps/tito-go/domains/go.tito.io", `{"paths":{"a":"tito-go.apps.example.com"}}`
	before := storeState(t, n)
	n.Must(412, "PUT", pathsURL, ipAdmin, paths, "If-Match", "W/"+etag(pathsURL))
	if before != storeState(t, n) {
		t.Fatal("a 412 changed the store")
	}
	n.Must(200, "PUT", pathsURL, ipAdmin, paths, "If-Match", `"nope", `+etag(pathsURL))
	n.Must(200, "PUT", pathsURL, ipAdmin, paths, star...)
	n.Must(412, "PUT", "/v1/apps/tito-go/domains/unclaimed.example.com/paths", ipAdmin, `{"paths":{}}`, star...)
	n.Must(412, "PUT", "/v1/apps/tito-go", ipAdmin, app, "If-Match", "W/"+etag("/v1/apps/tito-go"))
	n.Must(200, "PUT", "/v1/apps/tito-go", ipAdmin, app, "If-Match", etag("/v1/apps/tito-go"))
	n.Must(200, "PUT", "/v1/apps/tito-go", ipAdmin, app, star...)
	n.Must(412, "PUT", "/v1/apps/newcomer", ipAdmin, `{"account":"acme"}`, star...)
	n.Must(412, "DELETE", "/v1/apps/newcomer", ipAdmin, "", star...)
	n.Must(404, "DELETE", "/v1/apps/newcomer", ipAdmin, "") // without If-Match: not found
	n.Must(201, "PUT", claim, ipAdmin, "")
	n.Must(412, "DELETE", claim, ipAdmin, "", "If-Match", "W/"+etag(claim))
	n.Must(200, "DELETE", claim, ipAdmin, "", "If-Match", etag(claim))
	n.Must(201, "PUT", claim, ipAdmin, "")
	n.Must(200, "DELETE", claim, ipAdmin, "", star...)
	n.Must(412, "DELETE", claim, ipAdmin, "", star...)
}
