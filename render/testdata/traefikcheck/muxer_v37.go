//go:build traefik37

package main

import (
	"context"
	"net"
	"net/http"

	"github.com/traefik/traefik/v3/pkg/config/dynamic"
	httpmuxer "github.com/traefik/traefik/v3/pkg/muxer/http"
	tcpmuxer "github.com/traefik/traefik/v3/pkg/muxer/tcp"
	"github.com/traefik/traefik/v3/pkg/server/middleware"
	"github.com/traefik/traefik/v3/pkg/tcp"
)

// Traefik v3.7's API where it differs from v3.6's: the muxers take the providers'
// precedence (none here: the render's routers all come from one provider), AddRoute the
// router's provider, NewConnData the client's address, and the middleware builder's
// BuildChain is BuildMiddlewareChain.

const traefikLine = "v3.7"

func newHTTPMuxer(parser httpmuxer.SyntaxParser) *httpmuxer.Muxer {
	return httpmuxer.NewMuxer(parser, nil)
}

func addHTTPRoute(m *httpmuxer.Muxer, rule, syntax string, priority int, h http.Handler) error {
	return m.AddRoute(rule, syntax, priority, "http", h)
}

func newTCPMuxer() (*tcpmuxer.Muxer, error) { return tcpmuxer.NewMuxer(nil) }

func addTCPRoute(m *tcpmuxer.Muxer, rule, syntax string, priority int, h tcp.Handler) error {
	return m.AddRoute(rule, syntax, priority, "http", h)
}

// connData is what the entry point's TCP router hands the muxer for a ClientHello
// with serverName (pkg/server/router/tcp/router.go: tcpmuxer.NewConnData).
func connData(serverName string) (tcpmuxer.ConnData, error) {
	return tcpmuxer.NewConnData(serverName, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
}

// middlewareChain is the router manager's middleware chain for names in ctx's provider,
// ending in next.
func middlewareChain(b *middleware.Builder, ctx context.Context, names []string, next http.Handler) (http.Handler, error) {
	return b.BuildMiddlewareChain(ctx, names).Then(next)
}

// retryAsBuilt is the retry configuration retry.New acts on. v3.7's file decoder sets
// maxRequestBodyBytes to its default (Retry.SetDefaults) and encoding/json leaves it
// nil, which retry.New reads as the same default; it bounds the body kept for retries
// on status codes, which the render does not ask for (no status).
func retryAsBuilt(r dynamic.Retry) dynamic.Retry {
	if r.MaxRequestBodyBytes == nil {
		n := dynamic.RetryDefaultMaxRequestBodyBytes
		r.MaxRequestBodyBytes = &n
	}
	return r
}
