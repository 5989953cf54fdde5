package front

import (
	"sort"

	"github.com/scafo/ingress/render/routing"
)

// Route is one passthrough name's route.
type Route struct {
	// Name is the exact name, lower-case ASCII (a routing document's host).
	Name        string
	Application string
	// Upstreams are "host:port" dial addresses in document order: the first is where
	// a new connection goes, the rest exist for when it fails.
	Upstreams []string
	// ProxyProtocol is 0 or 2 (routing.ProxyProtocolV2): a v2 header goes first on
	// TCP. A QUIC flow carries none.
	ProxyProtocol int
}

// Table is an immutable lookup of passthrough names. A nil *Table holds no route.
type Table struct {
	routes   map[string]*Route
	revision string
	serial   uint64
}

// NewTable indexes routes by name. A later duplicate of a name is ignored (a routing
// document never holds one).
func NewTable(routes []Route) *Table {
	t := &Table{routes: make(map[string]*Route, len(routes))}
	for i := range routes {
		r := routes[i]
		if _, dup := t.routes[r.Name]; dup || r.Name == "" {
			continue
		}
		r.Upstreams = append([]string(nil), r.Upstreams...)
		t.routes[r.Name] = &r
	}
	return t
}

// FromDocument is the table of a routing document's passthrough routes: every other
// route (HTTP, wildcard) goes to the HTTP ingress and is not in it.
func FromDocument(doc *routing.Document) *Table {
	if doc == nil {
		return NewTable(nil)
	}
	var rs []Route
	for _, r := range doc.Routes {
		if !r.Passthrough || !exactName(r.Host) {
			continue
		}
		ups := make([]string, 0, len(r.Upstreams))
		for _, u := range r.Upstreams {
			ups = append(ups, u.Address)
		}
		rs = append(rs, Route{Name: r.Host, Application: r.Application, Upstreams: ups, ProxyProtocol: r.ProxyProtocol})
	}
	t := NewTable(rs)
	t.revision = doc.Revision
	return t
}

// Lookup finds the route of a server name as a client sent it: ASCII letters fold
// to lower case and nothing else changes, so a name reaches a route only if it is
// the route's name byte for byte but for ASCII case. Spaces, a trailing dot, non-ASCII
// characters (U+0130, U+017F, U+212A, whose case mappings reach ASCII), a port, an
// empty name: all miss.
func (t *Table) Lookup(serverName string) (*Route, bool) {
	if t == nil || len(serverName) == 0 || len(serverName) > 253 {
		return nil, false
	}
	var buf [253]byte
	b := buf[:len(serverName)]
	for i := 0; i < len(serverName); i++ {
		c := serverName[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	r, ok := t.routes[string(b)]
	return r, ok
}

// Len is the number of passthrough names.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.routes)
}

// Names lists the passthrough names, sorted.
func (t *Table) Names() []string {
	if t == nil {
		return nil
	}
	ns := make([]string, 0, len(t.routes))
	for n := range t.routes {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// Revision is the document revision the table was built from ("" for none).
func (t *Table) Revision() string {
	if t == nil {
		return ""
	}
	return t.revision
}

// exactName: what a routing document's passthrough host must be (lower-case ASCII
// letters, digits, '-' and '.', no wildcard). Derivation guarantees it; the front
// checks again rather than trust a document it did not derive.
func exactName(h string) bool {
	if h == "" || len(h) > 253 || h[0] == '.' || h[len(h)-1] == '.' {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
