//go:build !traefik37

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

// Traefik v3.6's API (the default build) for what differs in v3.7 (muxer_v37.go,
// built with -tags traefik37): the muxers, NewConnData, the middleware chain builder.

const traefikLine = "v3.6"

func newHTTPMuxer(parser httpmuxer.SyntaxParser) *httpmuxer.Muxer {
	return httpmuxer.NewMuxer(parser)
}

func addHTTPRoute(m *httpmuxer.Muxer, rule, syntax string, priority int, h http.Handler) error {
	return m.AddRoute(rule, syntax, priority, h)
}

func newTCPMuxer() (*tcpmuxer.Muxer, error) { return tcpmuxer.NewMuxer() }

func addTCPRoute(m *tcpmuxer.Muxer, rule, syntax string, priority int, h tcp.Handler) error {
	return m.AddRoute(rule, syntax, priority, h)
}

// connData is what the entry point's TCP router hands the muxer for a ClientHello
// with serverName (pkg/server/router/tcp/router.go: tcpmuxer.NewConnData).
func connData(serverName string) (tcpmuxer.ConnData, error) {
	return tcpmuxer.NewConnData(serverName, clientConn{}, nil)
}

// clientConn is a connection from 127.0.0.1 that only tells its address.
type clientConn struct{ net.Conn }

func (clientConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000} }
func (clientConn) CloseWrite() error    { return nil }

// middlewareChain is the router manager's middleware chain for names in ctx's provider,
// ending in next.
func middlewareChain(b *middleware.Builder, ctx context.Context, names []string, next http.Handler) (http.Handler, error) {
	return b.BuildChain(ctx, names).Then(next)
}

// retryAsBuilt is the retry configuration retry.New acts on: v3.6's is the decoded one.
func retryAsBuilt(r dynamic.Retry) dynamic.Retry { return r }
