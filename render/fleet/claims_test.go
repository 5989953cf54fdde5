package fleet

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestClaimConflict(t *testing.T) {
	platform := []string{"apps.example.com", "example.net"}
	claims := []Claim{
		{Host: "ti.to", Account: "tito", App: "tito-classic"},
		{Host: "go.tito.io", Account: "tito", App: "tito-go"},
		{Host: "*.shop.example.org", Account: "acme", App: "shop"},
		{Host: "vip.shop.example.org", Account: "acme", App: "shop-vip"},
		{Host: "a.corp.example", Account: "globex", App: "gx"},
		{Host: "apps.example.com", Account: "globex", App: "gx"}, // a claimed apex
		{Host: "lost.example.org"},                               // unreadable: holder unknown
	}
	const (
		ok       = ""
		held     = "held"
		platName = "platform"
	)
	for _, tc := range []struct {
		host, account string
		want          string // ok, held or platName
		holder        string
		msg           string // part of the error
	}{
		// Wildcards against exact names of other accounts, both directions.
		{"*.tito.io", "acme", held, "tito-go", "*.tito.io would cover go.tito.io"},
		{"*.tito.io", "tito", ok, "", ""}, // its own names
		{"x.shop.example.org", "tito", held, "shop", "covered by the wildcard *.shop.example.org"},
		{"x.shop.example.org", "acme", ok, "", ""},
		{"*.corp.example", "acme", held, "gx", "would cover a.corp.example"},
		{"ti.to", "acme", held, "tito-classic", "ti.to is held by application \"tito-classic\""},
		{"*.shop.example.org", "tito", held, "shop", "is held by"},
		{"vip.shop.example.org", "tito", held, "shop", ""}, // equal to one, covered by another: the smallest host is named
		// Coverage is exactly one label.
		{"shop.example.org", "tito", ok, "", ""},
		{"a.b.shop.example.org", "tito", ok, "", ""},
		{"*.b.shop.example.org", "tito", ok, "", ""},
		{"*.example.org", "tito", held, "", "holder is unknown"}, // covers lost.example.org
		{"lost.example.org", "tito", held, "", "holder is unknown"},
		{"*.example.org", "acme", held, "", "holder is unknown"},
		// The platform: strictly below a domain, a wildcard of or under it, a wildcard over its apex.
		{"shop.apps.example.com", "acme", platName, "apps.example.com", "is a platform host"},
		{"a.b.apps.example.com", "acme", platName, "apps.example.com", "under the platform domain"},
		{"*.apps.example.com", "acme", platName, "apps.example.com", "never route by wildcard"},
		{"*.x.apps.example.com", "acme", platName, "apps.example.com", "under the platform domain"},
		{"*.example.com", "acme", platName, "apps.example.com", "would cover apps.example.com"},
		{"*.example.com", "globex", platName, "apps.example.com", "apex"}, // even for the apex's own claimant
		{"x.example.net", "acme", platName, "example.net", "is a platform host"},
		{"*.example.net", "acme", platName, "example.net", "never route by wildcard"},
		{"example.net", "acme", ok, "", ""},
		{"xapps.example.com", "acme", ok, "", ""},
		{"apps.example.com.evil.org", "acme", ok, "", ""},
		{"*.evil.org", "acme", ok, "", ""},
		// The apex itself is claimable exactly, and then exclusive like any name.
		{"apps.example.com", "acme", held, "gx", "is held by"},
		{"apps.example.com", "globex", ok, "", ""},
	} {
		for _, order := range []string{"forward", "reversed"} {
			cs := slices.Clone(claims)
			if order == "reversed" {
				slices.Reverse(cs)
			}
			holder, err := ClaimConflict(tc.host, tc.account, cs, platform)
			name := tc.account + " claims " + tc.host + " (" + order + ")"
			switch tc.want {
			case ok:
				if err != nil {
					t.Errorf("%s: %v, want allowed", name, err)
				}
				continue
			case held:
				if !errors.Is(err, ErrHeldByAnotherAccount) || errors.Is(err, ErrPlatformName) {
					t.Errorf("%s: %v, want ErrHeldByAnotherAccount", name, err)
					continue
				}
			case platName:
				if !errors.Is(err, ErrPlatformName) || errors.Is(err, ErrHeldByAnotherAccount) {
					t.Errorf("%s: %v, want ErrPlatformName", name, err)
					continue
				}
				if perr := PlatformConflict(tc.host, platform); !errors.Is(perr, ErrPlatformName) || perr.Error() != err.Error() {
					t.Errorf("%s: PlatformConflict = %v, want the same refusal as ClaimConflict (%v)", name, perr, err)
				}
			}
			if holder != tc.holder {
				t.Errorf("%s: holder %q, want %q (%v)", name, holder, tc.holder, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s: %q, want it to contain %q", name, err, tc.msg)
			}
		}
		if tc.want != platName {
			if err := PlatformConflict(tc.host, platform); err != nil {
				t.Errorf("PlatformConflict(%q) = %v, want nil", tc.host, err)
			}
		}
	}
}
