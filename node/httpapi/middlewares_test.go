package httpapi_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/httpapi"
)

// middlewaresNode is a node whose configuration declares two Traefik middlewares, with
// application shop (account acme) listing one.
func middlewaresNode(t *testing.T) *inProcess {
	t.Helper()
	n := newInProcess(t, func(c *httpapi.Config) { c.Middlewares = []string{"auth@file", "www-redirect@file"} })
	n.Must(201, "PUT", "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"],"middlewares":["auth@file"]}`)
	return n
}

// storedMiddlewares is application app's middlewares as the admin reads them.
func storedMiddlewares(t *testing.T, n *inProcess, app string) []string {
	t.Helper()
	var a struct{ Middlewares []string }
	if err := json.Unmarshal(n.Must(200, "GET", "/v1/apps/"+app, ipAdmin, ""), &a); err != nil {
		t.Fatal(err)
	}
	return a.Middlewares
}

// TestAnUndeclaredMiddlewareIsRefusedOverTheAPI: through PUT /v1/apps/{app}, a name the
// node's configuration does not declare is a 400 whose body names the entry
// (middlewares[1]) and the declared names; a middleware on a passthrough application a
// 400 naming middlewares; nothing is written. A declared list is stored in order, and
// the answer warns that Caddy ingresses do not apply it.
func TestAnUndeclaredMiddlewareIsRefusedOverTheAPI(t *testing.T) {
	t.Parallel()
	n := middlewaresNode(t)
	for _, c := range []struct{ body, field string }{
		{`{"account":"acme","placement":["vps-a"],"middlewares":["auth@file","basic@file"]}`, "middlewares[1]"},
		{`{"account":"acme","placement":["vps-a"],"middlewares":["auth"]}`, "middlewares[0]"},
		{`{"account":"acme","placement":["vps-a"],"passthrough":true,"middlewares":["auth@file"]}`, "middlewares"},
	} {
		var e struct{ Error, Detail string }
		if err := json.Unmarshal(n.Must(400, "PUT", "/v1/apps/shop", ipAdmin, c.body), &e); err != nil {
			t.Fatal(err)
		}
		if e.Error != "invalid application" || !strings.HasPrefix(e.Detail, c.field+" ") && !strings.HasPrefix(e.Detail, c.field+":") {
			t.Fatalf("%s: answered %+v, want invalid application naming %s", c.body, e, c.field)
		}
	}
	if got := storedMiddlewares(t, n, "shop"); !slices.Equal(got, []string{"auth@file"}) {
		t.Fatalf("stored %v after refused writes, want [auth@file]", got)
	}
	var a struct {
		Middlewares []string
		Warnings    []string
	}
	json.Unmarshal(n.Must(200, "PUT", "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"],"middlewares":["www-redirect@file","auth@file"]}`), &a)
	if !slices.Equal(a.Middlewares, []string{"www-redirect@file", "auth@file"}) || len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "Caddy ingress answers 503") {
		t.Fatalf("answer %+v: want the list in order and the Caddy warning", a)
	}
}
