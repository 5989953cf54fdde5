package fleetwrite

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// TestAnUndeclaredMiddlewareIsRefusedNamingTheField: an application may list only the
// middlewares the node's configuration declares (traefik.middlewares), each once, in
// name@provider form, and none on a passthrough application; each refusal is a 400
// naming the entry (middlewares[i]) or the field, and writes nothing. A declared list
// is stored in its order.
func TestAnUndeclaredMiddlewareIsRefusedNamingTheField(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		app    fleet.App
		field  string // "" when valid
		detail string
	}{
		{fleet.App{Account: "acme", Middlewares: []string{"www-redirect@file", "auth@file"}}, "", ""},
		{fleet.App{Account: "acme", Middlewares: []string{}}, "", ""},
		{fleet.App{Account: "acme", Middlewares: []string{"auth@file", "basic@file"}}, "middlewares[1]", "traefik.middlewares: auth@file, www-redirect@file"},
		{fleet.App{Account: "acme", Middlewares: []string{"auth@docker"}}, "middlewares[0]", "not a middleware this node's configuration declares"},
		{fleet.App{Account: "acme", Middlewares: []string{"auth"}}, "middlewares[0]", "name@provider"},
		{fleet.App{Account: "acme", Middlewares: []string{"auth@file", "auth@file"}}, "middlewares[1]", "listed twice"},
		{fleet.App{Account: "acme", Passthrough: true, Middlewares: []string{"auth@file"}}, "middlewares", "a middleware is HTTP"},
	} {
		f := newFixture(t)
		f.w.cfg.Middlewares = []string{"auth@file", "www-redirect@file"}
		serial := f.serial(t)
		a, _, _, err := f.w.PutApp(ctx, admin, "shop", tc.app, "")
		if tc.field == "" {
			if err != nil {
				t.Fatalf("%+v refused: %v", tc.app, err)
			}
			stored, _, err := f.w.App(ctx, "shop")
			if err != nil || !slices.Equal(stored.Middlewares, tc.app.Middlewares) || !slices.Equal(a.Middlewares, tc.app.Middlewares) {
				t.Fatalf("stored %v (%v), want %v in order", stored.Middlewares, err, tc.app.Middlewares)
			}
			continue
		}
		wantInvalid(t, f, serial, err, tc.field)
		if !strings.Contains(err.Error(), tc.detail) {
			t.Fatalf("%v: want it to say %q", err, tc.detail)
		}
	}

	// A node that declares none refuses every list.
	f := newFixture(t)
	serial := f.serial(t)
	_, _, _, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Middlewares: []string{"auth@file"}}, "")
	wantInvalid(t, f, serial, err, "middlewares[0]")
}
