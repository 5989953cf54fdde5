package routing

import (
	"errors"
	"strings"
	"testing"
)

func TestParseGroups(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // sorted, comma-joined; "" when an error is expected
		err  string
	}{
		{"default", "default", ""},
		{"eu-2,eu-1", "eu-1,eu-2", ""},
		{strings.TrimSuffix(strings.Repeat("g,", 16), ","), "", "listed twice"},
		{"", "", "group"},
		{"eu-1,", "", "group"},
		{"EU-1", "", "group"},
		{"eu 1", "", "group"},
		{"-eu", "", "group"},
		{"eu-1,eu-1", "", "listed twice"},
		{strings.Repeat("a", 64), "", "group"},
		{"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "", "more than 16 groups"},
		{strings.Repeat("a,", 600), "", "longer than"},
	} {
		got, err := ParseGroups(tc.in)
		if tc.err != "" {
			var fe *FieldError
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &fe) || fe.Field != "group" {
				t.Errorf("ParseGroups(%.40q) = %v, %v; want a FieldError on group containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("ParseGroups(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestValidateGroupRules(t *testing.T) {
	up := []Upstream{{Node: "n1", Address: "10.0.0.1:1", APIPort: 7400}}
	for _, tc := range []struct {
		name   string
		routes []Route
		err    string
	}{
		{"groups of two apps", []Route{{Host: "a.x", Application: "a", Upstreams: up, Group: "eu-1"}, {Host: "b.x", Application: "b", Upstreams: up}}, ""},
		{"default spelled out", []Route{{Host: "a.x", Application: "a", Upstreams: up, Group: "default"}}, "routes[0].group"},
		{"malformed", []Route{{Host: "a.x", Application: "a", Upstreams: up, Group: "Eu"}}, "routes[0].group"},
		{"one app, two groups", []Route{{Host: "a.x", Application: "a", Upstreams: up, Group: "eu-1"}, {Host: "b.x", Application: "a", Upstreams: up}}, "routes[1].group"},
	} {
		d := &Document{V: Version, Routes: tc.routes}
		err := d.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}
