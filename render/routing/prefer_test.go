package routing

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func nodesOf(us []Upstream) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Node
	}
	return out
}

func TestPreferMovesNodeFirstAndKeepsTheRestInOrder(t *testing.T) {
	base := sampleDocument()
	for _, tc := range []struct {
		node      string
		wantTiTo  []string // ti.to: vps-a, vps-c, vps-b
		wantShop  []string // shop.apps.example.com: vps-a, vps-b
		wantGo    []string // go.tito.io: vps-b
		wantAPI   []string // vps-a, vps-b, vps-c
		wantError bool
	}{
		{node: "", wantTiTo: []string{"vps-a", "vps-c", "vps-b"}, wantShop: []string{"vps-a", "vps-b"},
			wantGo: []string{"vps-b"}, wantAPI: []string{"vps-a", "vps-b", "vps-c"}},
		{node: "vps-b", wantTiTo: []string{"vps-b", "vps-a", "vps-c"}, wantShop: []string{"vps-b", "vps-a"},
			wantGo: []string{"vps-b"}, wantAPI: []string{"vps-b", "vps-a", "vps-c"}},
		{node: "vps-c", wantTiTo: []string{"vps-c", "vps-a", "vps-b"}, wantShop: []string{"vps-a", "vps-b"},
			wantGo: []string{"vps-b"}, wantAPI: []string{"vps-c", "vps-a", "vps-b"}},
		{node: "vps-a", wantTiTo: []string{"vps-a", "vps-c", "vps-b"}, wantShop: []string{"vps-a", "vps-b"},
			wantGo: []string{"vps-b"}, wantAPI: []string{"vps-a", "vps-b", "vps-c"}},
		// Retired (unknown but valid) node: unchanged, never an error.
		{node: "vps-retired", wantTiTo: []string{"vps-a", "vps-c", "vps-b"}, wantShop: []string{"vps-a", "vps-b"},
			wantGo: []string{"vps-b"}, wantAPI: []string{"vps-a", "vps-b", "vps-c"}},
		{node: "VPS-B", wantError: true},
		{node: "vps_b", wantError: true},
		{node: "vps-b.example", wantError: true},
		{node: "-x", wantError: true},
	} {
		t.Run(tc.node, func(t *testing.T) {
			before := mustMarshal(t, base)
			got, err := Prefer(base, tc.node)
			if tc.wantError {
				if field, ok := InvalidField(err); !ok || field != "prefer" || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Prefer(%q) error = %v, want a *FieldError on prefer", tc.node, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Prefer(%q): %v", tc.node, err)
			}
			byHost := map[string][]string{}
			for _, r := range got.Routes {
				byHost[r.Host] = nodesOf(r.Upstreams)
			}
			for host, want := range map[string][]string{
				"ti.to": tc.wantTiTo, "shop.apps.example.com": tc.wantShop,
				"*.shop.example.org": tc.wantShop, "go.tito.io": tc.wantGo,
			} {
				if !slices.Equal(byHost[host], want) {
					t.Errorf("%s upstreams = %v, want %v", host, byHost[host], want)
				}
			}
			if g := nodesOf(got.API.Upstreams); !slices.Equal(g, tc.wantAPI) {
				t.Errorf("api upstreams = %v, want %v", g, tc.wantAPI)
			}
			after := mustMarshal(t, base)
			if !bytes.Equal(before, after) {
				t.Fatal("Prefer modified its input")
			}
			if got == base || got.API == base.API || &got.Routes[0] == &base.Routes[0] {
				t.Fatal("Prefer did not return a copy")
			}
		})
	}
}

func TestPreferMovesEveryEntryOfTheNodeStably(t *testing.T) {
	us := []Upstream{{Node: "a", Address: "1"}, {Node: "b", Address: "2"}, {Node: "a", Address: "3"},
		{Node: "c", Address: "4"}, {Node: "b", Address: "5"}}
	got := preferUpstreams(us, "b")
	want := []string{"2", "5", "1", "3", "4"}
	var addrs []string
	for _, u := range got {
		addrs = append(addrs, u.Address)
	}
	if !slices.Equal(addrs, want) {
		t.Fatalf("order = %v, want %v", addrs, want)
	}
	if us[0].Address != "1" || us[1].Address != "2" {
		t.Fatal("preferUpstreams reordered its input in place")
	}
}
