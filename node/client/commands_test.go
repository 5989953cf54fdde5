package client

import (
	"fmt"
	"testing"
)

// TestSplitArgs: flags may sit anywhere among the positional arguments; a non-bool flag
// without "=" takes the next argument; "--" ends the flags.
func TestSplitArgs(t *testing.T) {
	isBool := boolFlags(&appPutConfig{})
	if fmt.Sprint(isBool) != "map[json:true]" {
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
