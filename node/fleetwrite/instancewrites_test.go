package fleetwrite_test

// Instance writes by a hostile token: onto another application's port pair, at odd
// paths with ?wait=applied, a release repeated. What needs the node's insides (refused
// writes release their waiter slots, a no-op on a probe-down instance) is in
// node/waitapplied_test.go.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/render/fleet"
)

// An instance token cannot put its own instance on either member of another
// application's pair, nor on the member left quarantined by its release.
func TestHostileInstanceTokenCannotSquatAnotherAppsPair(t *testing.T) {
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/rival", testnode.AdminToken, `{"account":"evil","placement":["vps-a"]}`)
	var shop fleetwrite.Instance // the answer of POST /v1/node/instances
	json.Unmarshal(n.Must(201, "POST", "/v1/node/instances/shop", testnode.AdminToken, ""), &shop)
	if shop.Ports[0] == shop.Ports[1] {
		t.Fatalf("shop unpaired: %+v", shop)
	}
	_, tok := testnode.IssueToken(t, n, "evil", "rival", `"instance"`)
	n.Must(201, "POST", "/v1/node/instances/rival", tok, "")
	try := func(when string) {
		for _, p := range shop.Ports {
			resp, body := n.Do("PUT", "/v1/node/instances/rival?wait=applied&timeout=2s", tok, fmt.Sprintf(`{"port":%d,"ready":true}`, p))
			if resp.StatusCode != http.StatusConflict {
				t.Errorf("%s: rival onto shop's port %d: %d %s, want 409", when, p, resp.StatusCode, body)
			}
		}
	}
	try("shop holds its pair")
	n.Must(200, "DELETE", "/v1/node/instances/shop", testnode.AdminToken, "")
	try("shop released its pair")
}

// Odd paths on the instance writes with wait=applied: answered at once, never a panic,
// never a wait on a name that is not an application.
func TestHostileOddInstancePathsWithWaitAnswerAtOnce(t *testing.T) {
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	_, tok := testnode.IssueToken(t, n, "acme", "shop", `"instance"`)
	for _, path := range []string{
		"/v1/node/instances/",
		"/v1/node/instances//",
		"/v1/node/instances/shop%2Fx",
		"/v1/node/instances/sh%6Fp",
		"/v1/node/instances/shop/",
		"/v1/node/instances/" + strings.Repeat("a", 4000),
		"/v1/node/instances/..%2Fshop",
	} {
		for _, who := range []string{tok, testnode.AdminToken} {
			for _, method := range []string{"POST", "PUT", "DELETE"} {
				body := ""
				if method == "PUT" {
					body = `{"ready":true}`
				}
				start := time.Now()
				resp, b := n.Do(method, path+"?wait=applied&timeout=20s", who, body)
				if time.Since(start) > 5*time.Second || resp.StatusCode < 400 || resp.StatusCode >= 500 {
					t.Errorf("%s %.60s: %d after %s %.200s, want a 4xx at once", method, path, resp.StatusCode, time.Since(start), b)
				}
			}
		}
	}
	// The node's instance registry, as GET /v1/node/instances lists it.
	var list struct{ Instances []fleetwrite.Instance }
	if err := json.Unmarshal(n.Must(200, "GET", "/v1/node/instances", testnode.AdminToken, ""), &list); err != nil {
		t.Fatal(err)
	}
	for _, i := range list.Instances {
		if i.App == "shop" {
			t.Error("an odd path allocated shop's instance")
		}
	}
}

// A release with wait=applied answers "applied" only once the record names no
// instance; a second release is 404 (nothing to wait for), never 200 applied.
func TestHostileReleaseTwiceIsNotAppliedTwice(t *testing.T) {
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	n.Must(201, "PUT", "/v1/apps/shop", testnode.AdminToken, `{"account":"acme","placement":["vps-a"]}`)
	_, tok := testnode.IssueToken(t, n, "acme", "shop", `"instance"`)
	n.Must(201, "POST", "/v1/node/instances/shop", tok, "")
	resp, body := n.Do("DELETE", "/v1/node/instances/shop?wait=applied&timeout=10s", tok, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"applied":true`) {
		t.Fatalf("release: %d %s", resp.StatusCode, body)
	}
	var rec fleet.NodeRecord
	obj, err := n.St.Get(t.Context(), fleet.NodeKey("vps-a"))
	if err != nil {
		t.Fatal(err)
	}
	b := obj.Value
	json.Unmarshal(b, &rec)
	if _, ok := rec.Instances["shop"]; ok {
		t.Errorf("release answered applied while the record still names shop: %s", b)
	}
	if resp, body := n.Do("DELETE", "/v1/node/instances/shop?wait=applied&timeout=10s", tok, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("second release: %d %s, want 404", resp.StatusCode, body)
	}
}
