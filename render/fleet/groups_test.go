package fleet

import (
	"slices"
	"strings"
	"testing"
)

// TestDeriveGroups: an application's hosts carry its group (absent for the default);
// a platform domain mapped to a group yields hosts for that group's applications only;
// a stored group that is not a valid name skips the application and says why; a
// mapping of a domain that is not a platform domain, or to a malformed group, is
// reported.
func TestDeriveGroups(t *testing.T) {
	ready := map[string]Instance{"a": {Port: 1001, Ready: true}, "b": {Port: 1002, Ready: true},
		"c": {Port: 1003, Ready: true}, "bad": {Port: 1004, Ready: true}, "lost": {Port: 1005, Ready: true}}
	st := State{
		Apps: []App{
			{Name: "a", Account: "x", Placement: []string{"n1"}},
			{Name: "b", Account: "x", Placement: []string{"n1"}, Ingress: &Ingress{Group: "eu-1"}},
			{Name: "c", Account: "x", Placement: []string{"n1"}, Ingress: &Ingress{Group: "default"}},
			{Name: "bad", Account: "x", Placement: []string{"n1"}, Ingress: &Ingress{Group: "EU_1"}},
			{Name: "lost", Account: "x", Placement: []string{"n1"}, Ingress: &Ingress{Group: "eu-2"}}, // no platform domain
		},
		Claims: []Claim{{Host: "b.example.org", Account: "x", App: "b"}, {Host: "lost.example.org", Account: "x", App: "lost"}},
		Nodes:  []NodeRecord{{Name: "n1", Address: "10.0.0.1", APIPort: 7400, Instances: ready}},
	}
	opt := Options{PlatformDomains: []string{"apps.example.com", "eu1.example.com", "us1.example.com"},
		DomainGroups: map[string]string{"eu1.example.com": "eu-1", "elsewhere.example.com": "eu-2", "us1.example.com": "Bad Group"}}
	doc, skipped := Derive(st, opt)
	var got []string
	for _, r := range doc.Routes {
		got = append(got, r.Host+"@"+r.Group)
	}
	// lost has no platform host, but its custom domain routes.
	want := []string{"a.apps.example.com@", "b.eu1.example.com@eu-1", "b.example.org@eu-1", "c.apps.example.com@", "lost.example.org@eu-2"}
	if !slices.Equal(got, want) {
		t.Errorf("routes %v, want %v", got, want)
	}
	if err := doc.Validate(); err != nil {
		t.Errorf("derived document invalid: %v", err)
	}
	var reasons []string
	for _, s := range skipped {
		reasons = append(reasons, s.Object+": "+s.Reason)
	}
	all := strings.Join(reasons, "\n")
	for _, sub := range []string{
		"apps/bad.json: ingress.group",
		`platform.groups: "elsewhere.example.com" is not a platform domain`,
		`platform.groups: domain "us1.example.com"`,
		`apps/lost.json: ingress group "eu-2" has no platform domain`,
	} {
		if !strings.Contains(all, sub) {
			t.Errorf("skipped lacks %q:\n%s", sub, all)
		}
	}
	if n := strings.Count(all, "has no platform domain"); n != 1 {
		t.Errorf("%d applications reported without a platform domain, want lost alone:\n%s", n, all)
	}
	// A fleet with no platform domain at all reports no application for it.
	if _, sk := Derive(st, Options{DomainGroups: opt.DomainGroups}); slices.ContainsFunc(sk, func(s Skipped) bool {
		return strings.Contains(s.Reason, "has no platform domain")
	}) {
		t.Errorf("no platform domain at all, yet reported: %+v", sk)
	}

	// Without groups anywhere, nothing carries one: the documents (and revisions) of
	// fleets that never used groups are unchanged. (A group moves the revision:
	// routing's TestRevisionMovesWhenAnyFieldChanges.)
	st.Apps = st.Apps[:1]
	doc, _ = Derive(st, Options{PlatformDomains: []string{"apps.example.com"}})
	for _, r := range doc.Routes {
		if r.Group != "" {
			t.Errorf("route %s has group %q in a fleet without groups", r.Host, r.Group)
		}
	}
}
