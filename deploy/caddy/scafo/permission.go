package scafo

import (
	"context"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
)

func init() {
	caddy.RegisterModule(Permission{})
}

// Permission (tls.permission.scafo) lets on-demand TLS obtain or load a certificate
// only for a name some current routing document names exactly, as a route host or an
// API host. It answers from the document the scafo app holds: no request to a node per
// handshake. Exactly means exactly: a name only a wildcard route covers is refused,
// and so is any non-canonical spelling (upper case, a trailing dot, a port, an IP
// literal, a wildcard). With no document yet (no node answered, no state file), every
// name is refused.
type Permission struct {
	app *App
}

// CaddyModule returns the Caddy module information.
func (Permission) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.permission.scafo", New: func() caddy.Module { return new(Permission) }}
}

// Provision finds the scafo app.
func (p *Permission) Provision(ctx caddy.Context) error {
	a, err := scafoApp(ctx)
	if err != nil {
		return err
	}
	p.app = a
	return nil
}

// CertificateAllowed implements caddytls.OnDemandPermission.
func (p *Permission) CertificateAllowed(_ context.Context, name string) error {
	if p.app.poller.Table().Allowed(name) {
		return nil
	}
	return fmt.Errorf("%q: %w: the routing document does not name it exactly", name, caddytls.ErrPermissionDenied)
}

// UnmarshalCaddyfile reads `permission scafo`.
func (p *Permission) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

var (
	_ caddytls.OnDemandPermission = (*Permission)(nil)
	_ caddy.Provisioner           = (*Permission)(nil)
	_ caddyfile.Unmarshaler       = (*Permission)(nil)
)
