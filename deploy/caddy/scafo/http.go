package scafo

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

func init() {
	caddy.RegisterModule(Match{})
	caddy.RegisterModule(Upstreams{})
}

// selectionVar is the request variable where Match leaves its Selection for Upstreams:
// both see one document, even when a flip lands between them.
const selectionVar = "scafo.selection"

// Match (http.matchers.scafo) matches a request whose host the routing document names:
// an application route (exact host, then the one-label wildcard once) or the platform
// API apex outside its denied paths. A host the document does not name is left to the
// routes after it (404 in the shipped Caddyfile: there is no default route).
//
// A request path carrying one of the escapes the shipped Traefik entry points refuse
// (%2F %5C %00 %3B %25 %3F %23, any case) is answered 400, whatever its host, unless
// allow_encoded is set: the same refusal through either ingress.
type Match struct {
	AllowEncoded bool `json:"allow_encoded,omitempty"`

	app *App
}

// CaddyModule returns the Caddy module information.
func (Match) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.matchers.scafo", New: func() caddy.Module { return new(Match) }}
}

// Provision finds the scafo app.
func (m *Match) Provision(ctx caddy.Context) error {
	a, err := scafoApp(ctx)
	if err != nil {
		return err
	}
	m.app = a
	return nil
}

// MatchWithError implements caddyhttp.RequestMatcherWithError.
func (m *Match) MatchWithError(r *http.Request) (bool, error) {
	p := r.URL.EscapedPath()
	if !m.AllowEncoded {
		if e := RefusedEscape(p); e != "" {
			return false, caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("request path carries %s, which this ingress refuses", e))
		}
	}
	sel := m.app.poller.Table().Lookup(r.Host, p)
	if sel.Kind == KindNone {
		return false, nil
	}
	caddyhttp.SetVar(r.Context(), selectionVar, sel)
	return true, nil
}

// Match implements caddyhttp.RequestMatcher.
func (m *Match) Match(r *http.Request) bool {
	ok, _ := m.MatchWithError(r)
	return ok
}

// UnmarshalCaddyfile reads `scafo [allow_encoded]`.
func (m *Match) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	for d.NextArg() {
		if d.Val() != "allow_encoded" {
			return d.Errf("scafo matcher: unknown argument %q", d.Val())
		}
		m.AllowEncoded = true
	}
	return nil
}

// Upstreams (http.reverse_proxy.upstreams.scafo) are the ordered upstreams of the route
// the request selected (by Match, or looked up here when no Match ran), for
// reverse_proxy with `lb_policy first`: the first available one serves, the rest are
// the failover order. A route with nothing ready has none: reverse_proxy answers 503,
// and no other route takes the host's traffic.
type Upstreams struct {
	app *App
}

// CaddyModule returns the Caddy module information.
func (Upstreams) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.reverse_proxy.upstreams.scafo", New: func() caddy.Module { return new(Upstreams) }}
}

// Provision finds the scafo app.
func (u *Upstreams) Provision(ctx caddy.Context) error {
	a, err := scafoApp(ctx)
	if err != nil {
		return err
	}
	u.app = a
	return nil
}

// GetUpstreams returns fresh Upstream values (reverse_proxy writes into them).
func (u *Upstreams) GetUpstreams(r *http.Request) ([]*reverseproxy.Upstream, error) {
	sel, ok := caddyhttp.GetVar(r.Context(), selectionVar).(Selection)
	if !ok {
		sel = u.app.poller.Table().Lookup(r.Host, r.URL.EscapedPath())
	}
	out := make([]*reverseproxy.Upstream, len(sel.Dials))
	for i, d := range sel.Dials {
		out[i] = &reverseproxy.Upstream{Dial: d}
	}
	return out, nil
}

// UnmarshalCaddyfile reads `dynamic scafo`.
func (u *Upstreams) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

var (
	_ caddyhttp.RequestMatcherWithError = (*Match)(nil)
	_ caddyhttp.RequestMatcher          = (*Match)(nil)
	_ caddy.Provisioner                 = (*Match)(nil)
	_ caddyfile.Unmarshaler             = (*Match)(nil)
	_ reverseproxy.UpstreamSource       = (*Upstreams)(nil)
	_ caddy.Provisioner                 = (*Upstreams)(nil)
	_ caddyfile.Unmarshaler             = (*Upstreams)(nil)
)
