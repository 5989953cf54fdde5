package routing

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMiddlewareReferencesAreValidated: a reference is name@provider, the provider
// required and never the fleet's own (http); a list holds each once and at most
// MaxMiddlewares; each refusal names the entry.
func TestMiddlewareReferencesAreValidated(t *testing.T) {
	for _, tc := range []struct {
		list  []string
		field string // "" when valid
		rule  string // a substring of the refusal
	}{
		{[]string{"auth@file"}, "", ""},
		{[]string{"auth@file", "www-redirect@file", "default-headers_v2.x@kubernetescrd", "rl@plugin-foo", "Auth@docker"}, "", ""},
		{[]string{"auth"}, "middlewares[0]", "name@provider"},
		{[]string{"auth@file", "@file"}, "middlewares[1]", "name before"},
		{[]string{"auth@"}, "middlewares[0]", "provider after"},
		{[]string{"a@b@c"}, "middlewares[0]", "provider may contain"},
		{[]string{"auth@File"}, "middlewares[0]", "provider may contain"},
		{[]string{"-auth@file"}, "middlewares[0]", "name may contain"},
		{[]string{"a uth@file"}, "middlewares[0]", "name may contain"},
		{[]string{"auth@file", "a\"b@file"}, "middlewares[1]", "name may contain"},
		{[]string{"scafo-retry@http"}, "middlewares[0]", "fleet's own"},
		{[]string{"auth@file", "www@file", "auth@file"}, "middlewares[2]", "listed twice (as middlewares[0])"},
		{[]string{strings.Repeat("a", MaxMiddlewareLen) + "@file"}, "middlewares[0]", "at most"},
		{[]string{""}, "middlewares[0]", "empty"},
	} {
		err := ValidateMiddlewares("middlewares", tc.list)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%q refused: %v", tc.list, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Rule, tc.rule) {
			t.Errorf("%q: got %v, want a refusal of %s (%q)", tc.list, err, tc.field, tc.rule)
		}
	}
	long := make([]string, MaxMiddlewares+1)
	for i := range long {
		long[i] = fmt.Sprintf("m%d@file", i)
	}
	if err := ValidateMiddlewares("middlewares", long); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d middlewares: got %v, want a refusal", len(long), err)
	}
	if err := ValidateMiddlewares("middlewares", long[:MaxMiddlewares]); err != nil {
		t.Errorf("%d middlewares refused: %v", MaxMiddlewares, err)
	}
}

// TestMiddlewaresAreAdditiveAndOrderIsContent: a document without middlewares writes
// no field and keeps its revision (an empty list too); a list survives Marshal and
// Decode in order. (Listing and reordering them moves the revision, and a middleware
// never hashes like a health path: TestRevisionMovesWhenAnyFieldChanges.)
func TestMiddlewaresAreAdditiveAndOrderIsContent(t *testing.T) {
	plain := sampleDocument()
	if b, _ := Marshal(plain); strings.Contains(string(b), "middlewares") {
		t.Fatalf("a document without middlewares writes the field: %s", b)
	}
	empty := cloneDocument(plain)
	empty.Routes[0].Middlewares, empty.Routes[2].Middlewares = []string{}, []string{}
	if ComputeRevision(empty) != plain.Revision {
		t.Fatal("an empty list moved the revision")
	}

	d := cloneDocument(plain)
	d.Routes[0].Middlewares = []string{"b@file", "a@file"}
	d.Routes[2].Middlewares = []string{"b@file", "a@file"}
	d.Seal()
	b := mustMarshal(t, d)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Routes[2].Middlewares; len(g) != 2 || g[0] != "b@file" || g[1] != "a@file" {
		t.Fatalf("round trip: %v", g)
	}
	if ComputeRevision(got) != d.Revision {
		t.Fatal("a decoded document has another revision")
	}
}
