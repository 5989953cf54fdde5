package reconcile

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// TestSameSettingsIsTheirJSON: sameSettings compares by value before it compares the
// JSON; its answer is the JSON's in every case, and its fast path reads every field of
// NodeSettings (a field added to it fails here until sameSettings compares it too).
func TestSameSettingsIsTheirJSON(t *testing.T) {
	if n := reflect.TypeFor[fleet.NodeSettings]().NumField(); n != 3 {
		t.Fatalf("fleet.NodeSettings has %d fields; sameSettings compares 3 by value (PlatformDomains, APIPublic, DomainGroups)", n)
	}
	cases := []fleet.NodeSettings{
		{},
		{PlatformDomains: []string{}},
		{PlatformDomains: []string{"a.example.com"}},
		{PlatformDomains: []string{"a.example.com", "b.example.com"}},
		{PlatformDomains: []string{"b.example.com", "a.example.com"}},
		{PlatformDomains: []string{"a.example.com"}, APIPublic: true},
		{PlatformDomains: []string{"a.example.com"}, DomainGroups: map[string]string{}},
		{PlatformDomains: []string{"a.example.com"}, DomainGroups: map[string]string{"a.example.com": "eu"}},
		{PlatformDomains: []string{"a.example.com"}, DomainGroups: map[string]string{"a.example.com": "us"}},
		{PlatformDomains: []string{"a.example.com"}, DomainGroups: map[string]string{"a.example.com": "eu", "b.example.com": "eu"}},
		// Unequal values that marshal alike (each invalid byte becomes \ufffd): the JSON decides.
		{PlatformDomains: []string{"a\xff.example.com"}},
		{PlatformDomains: []string{"a\xfe.example.com"}},
	}
	for _, a := range cases {
		for _, b := range cases {
			x, _ := json.Marshal(a)
			y, _ := json.Marshal(b)
			if got, want := sameSettings(a, b), string(x) == string(y); got != want {
				t.Errorf("sameSettings(%s, %s) = %v, their JSON says %v", x, y, got, want)
			}
		}
	}
}

func BenchmarkSameSettings(b *testing.B) {
	x := fleet.NodeSettings{PlatformDomains: []string{"apps.example.com", "apps.example.org"}, DomainGroups: map[string]string{"apps.example.org": "eu"}}
	y := fleet.NodeSettings{PlatformDomains: []string{"apps.example.com", "apps.example.org"}, DomainGroups: map[string]string{"apps.example.org": "eu"}}
	for b.Loop() {
		if !sameSettings(x, y) {
			b.Fatal("not the same")
		}
	}
}
