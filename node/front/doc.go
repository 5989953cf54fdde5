// Package front is the layer-4 front: it listens on 443/tcp and 443/udp, reads the
// TLS server name a client sends (a ClientHello on TCP, the CRYPTO frames of QUIC
// Initial packets on UDP), and hands the connection, unchanged, to the instances of
// the passthrough route of that exact name, in document order; anything else goes to
// the HTTP ingress behind it (Traefik's TLS entry point on an internal address, with
// a PROXY protocol v2 header). It follows the routing document the nodes publish as
// the provider plugin does, and reports what it applied as an ingress of kind
// "front" (docs/passthrough.md, "The layer-4 front"; docs/design.md §4).
//
// The rule it exists for: only the exact canonical name, ASCII case aside, reaches a
// passthrough application. Traefik folds more (strings.ToLower, TrimSpace).
package front
