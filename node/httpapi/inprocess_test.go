package httpapi_test

// The API in process (node/internal/apitest), and the requests the tests here make of it.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/internal/apitest"
	"github.com/scafo/ingress/node/store"
)

const (
	ipIngress          = apitest.Ingress
	ipIngressPrevious  = apitest.IngressPrevious
	ipAdmin            = apitest.Admin
	ipAdminPrevious    = apitest.AdminPrevious
	ipReadOnly         = apitest.ReadOnly
	ipReadOnlyPrevious = apitest.ReadOnlyPrevious
)

// inProcess is an API under test and what it was built over.
type inProcess struct{ *apitest.API }

// newInProcess builds the API of node vps-a, mid-rotation of its three tokens, with
// configure (may be nil) applied to its configuration first.
func newInProcess(t *testing.T, configure func(*httpapi.Config)) *inProcess {
	t.Helper()
	return &inProcess{apitest.New(t, apitest.Options{Configure: configure})}
}

// newInProcessOn is newInProcess over st (a store a test counts or shares between two
// APIs, as two nodes would).
func newInProcessOn(t *testing.T, st store.Store, configure func(*httpapi.Config)) *inProcess {
	t.Helper()
	return &inProcess{apitest.New(t, apitest.Options{Store: st, Configure: configure})}
}

// issue mints an application token of app (account's) with roles, through the write
// domain as the admin.
func (p *inProcess) issue(t *testing.T, account, app string, roles ...string) string {
	t.Helper()
	it, err := p.Writer.IssueToken(context.Background(), fleetwrite.Actor{Admin: true}, account, app, roles)
	if err != nil {
		t.Fatal(err)
	}
	return it.Token
}

// raw sends target as the request line holds it (no client-side cleaning or escaping),
// parsed as Go's server parses a request; the test fails if it cannot be.
func (p *inProcess) raw(method, target, token, body string) (int, string) {
	p.T.Helper()
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, target)
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(req)))
	if err != nil {
		p.T.Fatalf("%s %s: %v", method, target, err)
	}
	rec := p.Serve(r)
	return rec.Code, rec.Body.String()
}

// pathsURL is the path map of ti.to, the domain fleetOf claims for its first
// application.
const pathsURL = "/v1/apps/tito-classic/domains/ti.to/paths"

// fleetOf creates apps (account acme) placed on this node with ready instances, and
// claims ti.to for the first. Nothing is routed: no reconcile pass runs here.
func (p *inProcess) fleetOf(apps ...string) {
	p.T.Helper()
	for i, app := range apps {
		p.Must(201, "PUT", "/v1/apps/"+app, ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
		p.Must(200, "PUT", "/v1/node/instances/"+app, ipAdmin, fmt.Sprintf(`{"port":%d,"ready":true}`, 25000+i))
	}
	p.Must(201, "PUT", "/v1/apps/"+apps[0]+"/domains/ti.to", ipAdmin, "")
}
