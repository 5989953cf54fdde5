package client

import (
	"fmt"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// TestSplitArgs: flags may sit anywhere among the positional arguments; a non-bool flag
// without "=" takes the next argument; "--" ends the flags.
func TestSplitArgs(t *testing.T) {
	isBool := boolFlags(&appPutConfig{})
	if fmt.Sprint(isBool) != "map[allownoingress:true json:true replace:true]" { // --allowNoIngress, --json, --replace
		t.Fatalf("bool flags of apps put: %v", isBool)
	}
	pos, flags := splitArgs([]string{"shop", "--url", "http://n:7400", "--json", "account=acme", "--placement=a,b", "-token", "t", "--", "--x"}, isBool)
	if got := fmt.Sprint(pos, flags); got != "[shop account=acme --x] [--url http://n:7400 --json --placement=a,b -token t]" {
		t.Fatalf("got %s", got)
	}
}

// TestAppPutKeyValues: account=, placement= and health= arguments set the same
// settings as the flags; anything else with "=" is refused.
func TestAppPutKeyValues(t *testing.T) {
	cfg := &appPutConfig{}
	rest, err := cfg.keyValues([]string{"shop", "account=acme", "placement=a,b", "health=/healthz"})
	if err != nil || fmt.Sprintf("%v %s %v %s", rest, cfg.Account, cfg.Placement, cfg.Health) != "[shop] acme [a b] /healthz" {
		t.Fatalf("got %v %+v %v", rest, cfg, err)
	}
	if _, err := cfg.keyValues([]string{"acount=acme"}); err == nil {
		t.Fatal("a misspelled key was accepted")
	}
}

// TestFailClosed: a route with no upstream, or held by no application, is served by
// the fail-closed 503 router, and `routes` says which.
func TestFailClosed(t *testing.T) {
	up := []routing.Upstream{{Node: "a", Address: "127.0.0.1:1"}}
	for _, c := range []struct {
		r    routing.Route
		want string
	}{
		{routing.Route{Host: "x.example", Application: "shop", Upstreams: up}, ""},
		{routing.Route{Host: "x.example", Application: "shop"}, "503 (fail closed: no ready instance)"},
		{routing.Route{Host: "x.example", Application: routing.UnownedApplication}, "503 (fail closed: a claim without a holder)"},
	} {
		if got := failClosed(c.r); got != c.want {
			t.Errorf("failClosed(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}
