package render

import (
	"net/url"
	"strings"
	"testing"
)

// Hostile round six: the applied callback is never reachable through the public API
// apex, whatever the spelling, and the probe's callback router takes nothing but its
// one exact path on its reserved host. Each spelling goes through Traefik's entry point
// (traefikEntry: unreserved escapes decoded, dot segments and repeated slashes resolved);
// when the apex's API router takes it, the path the node's router sees (chi routes on
// the raw path when it has one) must not be under /v1/ingress/.
func TestAppliedCallbackIsNeverRoutedByTheAPIApex(t *testing.T) {
	base := mustTraefik(t, acmeDoc(), Options{})
	mac := strings.Repeat("ab", 16)
	rev := strings.Repeat("cd", 16)
	body, err := WithAppliedProbe(base, AppliedProbe{Ingress: "edge", Revision: rev, MAC: mac,
		EntryPoint: "http://127.0.0.1:80", Node: "http://10.83.0.1:7400"})
	if err != nil {
		t.Fatal(err)
	}
	routers := compileRouters(t, decodeStrict(t, body))
	cb := AppliedPath("edge", rev, mac)
	tail := strings.TrimPrefix(cb, "/v1/ingress/")
	spellings := []string{
		cb, "/" + cb, cb + "/", "/v1//ingress/" + tail, "/v1/./ingress/" + tail, "/x/../v1/ingress/" + tail,
		"/v1/%69ngress/" + tail, "/%76%31/ingress/" + tail, "/v1/ingress%2F" + tail, "/v1%2Fingress/" + tail,
		"/v1%2fingress%2f" + tail, "/V1/ingress/" + tail, "/v1/ingress/%61pplied/" + strings.TrimPrefix(tail, "applied/"),
		"/v1/ingress/applied%2Fedge/" + rev + "/" + mac, "/v1/ingress/./applied/edge/" + rev + "/" + mac,
		"/v1/ingress/applied/edge/" + rev + "/" + mac + "?x=1", "/v1/ingress/applied/edge/" + rev + "/" + mac + "%3Fx",
		"/v1/ingress/applied/edge/" + rev + "/" + strings.ToUpper(mac),
	}
	checked := 0
	for _, s := range spellings {
		rp, backend, ok := traefikEntry(s)
		if !ok {
			continue
		}
		checked++
		got := route(t, routers, request{host: "apps.example.com", routingPath: rp})
		if strings.HasPrefix(got, "api-") {
			u, err := url.ParseRequestURI(backend)
			if err != nil {
				continue
			}
			node := u.Path
			if u.RawPath != "" {
				node = u.RawPath
			}
			if strings.HasPrefix(node, "/v1/ingress/") || node == "/v1/ingress" {
				t.Errorf("%q on the apex: router %s passes it to the node as %q", s, got, node)
			}
		}
		if got == "applied-callback" {
			t.Errorf("%q on the apex host reaches the callback router", s)
		}
		// On the probe's reserved host only the exact path is the callback.
		got = route(t, routers, request{host: AppliedHost, routingPath: rp})
		if (got == "applied-callback") != (rp == cb) {
			t.Errorf("%q (routing path %q) on %s: router %q", s, rp, AppliedHost, got)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d spellings checked", checked)
	}
	if got := route(t, routers, request{host: AppliedHost, routingPath: "/scafo-applied-check"}); got == "applied-check" {
		t.Error("the check router matches a request")
	}
}
