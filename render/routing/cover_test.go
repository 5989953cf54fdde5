package routing

import "testing"

func TestCoversIsExactlyOneLabelBelowTheWildcard(t *testing.T) {
	for _, tc := range []struct {
		wildcard, host string
		want           bool
	}{
		{"*.shop.example.org", "a.shop.example.org", true},
		{"*.shop.example.org", "xn--bcher-kva.shop.example.org", true},
		{"*.example.com", "apps.example.com", true},
		{"*.shop.example.org", "shop.example.org", false},        // the wildcard's own parent
		{"*.shop.example.org", "a.b.shop.example.org", false},    // two labels below
		{"*.shop.example.org", "ashop.example.org", false},       // not a label boundary
		{"*.shop.example.org", "a.shop.example.org.evil", false}, // suffix elsewhere
		{"*.shop.example.org", "*.a.shop.example.org", false},    // a wildcard is not a name
		{"*.shop.example.org", "*.shop.example.org", false},      // equal is not covering
		{"*.shop.example.org", ".shop.example.org", false},       // empty label
		{"*.shop.example.org", "", false},
		{"shop.example.org", "a.shop.example.org", false}, // not a wildcard
		{"*.", "a.", false},
		{"", "a", false},
	} {
		if got := Covers(tc.wildcard, tc.host); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.wildcard, tc.host, got, tc.want)
		}
	}
}

func TestOverlapsIsSymmetricEqualityOrCoverage(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"ti.to", "ti.to", true},
		{"*.x.example", "*.x.example", true},
		{"*.x.example", "a.x.example", true},
		{"a.x.example", "*.x.example", true},
		{"*.x.example", "*.a.x.example", false},
		{"*.x.example", "x.example", false},
		{"a.x.example", "b.x.example", false},
	} {
		if got := Overlaps(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlaps(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := Overlaps(tc.b, tc.a); got != tc.want {
			t.Errorf("Overlaps(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}
