package scafo

import (
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/scafo/ingress/render/routing"
)

// Table is one routing document compiled for lookups: immutable once built, swapped
// whole by the poller, read without locks by every request and handshake.
type Table struct {
	// Doc is the document the table was built from (canonical: routing.Decode).
	Doc *routing.Document
	// Serial and Epoch are the store serial the serving node derived Doc from
	// (X-Scafo-Serial, X-Scafo-Epoch); HasSerial false when the node sent none.
	HasSerial bool
	Serial    uint64
	Epoch     string
	// ETag is the node's ETag of the body ("" for a table loaded from the state file
	// without one).
	ETag string

	routes map[string]*routeEntry // route hosts, exact and one-label wildcards
	api    map[string]bool        // platform API apexes
	apiUps []string
	denied []string
	names  map[string]bool // names on-demand TLS may obtain: exact route hosts and API hosts
	// passthrough are the hosts of passthrough routes (routing.Route.Passthrough): an
	// application that terminates TLS itself needs layer-4 routing by server name,
	// which this Caddy does not have (no layer-4 module). Such a host is never routed
	// over HTTP (not even by a covering wildcard: its own route fails closed) and never
	// approved for a certificate; docs/passthrough.md says to put a Traefik in front.
	passthrough map[string]bool
	// unapplied are the applications whose routes list Traefik middlewares
	// (routing.Route.Middlewares), with their lists: this Caddy cannot apply a Traefik
	// middleware, and a middleware may be the application's authentication, so their
	// hosts, and the prefixes that select them, fail closed (503) rather than being
	// served without them. The poller logs them (docs/design.md §14).
	unapplied map[string][]string
}

// routeEntry is one route of the document.
type routeEntry struct {
	host  string
	app   string
	dials []string               // the ordered upstream list, as dial addresses
	paths map[string]*routeEntry // first path segment → target route (only targets in the document)
	// closed: the route's application lists middlewares (Table.unapplied); it has no
	// dials, and a prefix that selects it answers 503 instead of falling through to
	// the host's own route.
	closed bool
}

// Kind says what a lookup found.
type Kind int

const (
	// KindNone: the document does not name the host (or the path is denied on the
	// API apex): Caddy answers it itself (404 in the shipped configuration).
	KindNone Kind = iota
	// KindRoute: an application route.
	KindRoute
	// KindAPI: the platform API apex.
	KindAPI
)

// Selection is where one request goes.
type Selection struct {
	Kind Kind
	// Host is the document host that matched (the route's, a wildcard's, or the
	// apex); Target is the path map's target host when a prefix selected one ("" when
	// the host's own route serves).
	Host, Target string
	// Application is the serving route's application ("" for the API).
	Application string
	// Dials is the ordered upstream list (failover order). Empty for a route that
	// exists with nothing ready: the request is answered 503, never by another route.
	Dials []string
}

// NewTable compiles a document (already validated: routing.Decode) that routes every
// host it carries: the whole fleet's.
func NewTable(doc *routing.Document) *Table { return NewGroupTable(doc, nil) }

// NewGroupTable compiles the document of the ingress groups groups (?group=; nil: the
// whole fleet's document, every route routed). A route of another group is in such a
// document only as a path map's target (routing.ForGroups): it serves the prefixes
// that select it, never its own host (another group's ingresses route it), and
// on-demand TLS is not approved for it, as the Traefik render gives it no router.
func NewGroupTable(doc *routing.Document, groups []string) *Table {
	t := &Table{Doc: doc, routes: make(map[string]*routeEntry, len(doc.Routes)), api: map[string]bool{}, names: map[string]bool{}}
	all := make(map[string]*routeEntry, len(doc.Routes)) // path targets, any group
	for i := range doc.Routes {
		r := &doc.Routes[i]
		e := &routeEntry{host: r.Host, app: r.Application, dials: dials(r.Upstreams)}
		if len(r.Middlewares) > 0 {
			e.dials, e.closed = []string{}, true
			if t.unapplied == nil {
				t.unapplied = map[string][]string{}
			}
			t.unapplied[r.Application] = r.Middlewares
		}
		all[r.Host] = e
		if groups != nil && !slices.Contains(groups, r.GroupOf()) {
			continue
		}
		if r.Passthrough {
			if t.passthrough == nil {
				t.passthrough = map[string]bool{}
			}
			t.passthrough[r.Host] = true
			continue
		}
		t.routes[r.Host] = e
		if !routing.IsWildcard(r.Host) {
			t.names[r.Host] = true
		}
	}
	for i := range doc.Routes {
		r := &doc.Routes[i]
		e := t.routes[r.Host]
		if len(r.Paths) == 0 || e == nil {
			continue
		}
		e.paths = make(map[string]*routeEntry, len(r.Paths))
		for prefix, target := range r.Paths {
			if te, ok := all[target]; ok {
				e.paths[prefix] = te
			}
		}
	}
	if doc.API != nil {
		for _, h := range doc.API.Hosts {
			t.api[h] = true
			t.names[h] = true
		}
		t.apiUps = dials(doc.API.Upstreams)
		t.denied = doc.API.Denied
	}
	return t
}

func dials(us []routing.Upstream) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Address
	}
	return out
}

// Unapplied lists the applications of the table whose routes list Traefik middlewares,
// sorted, each as "app (m1, m2)": this Caddy answers 503 for their hosts and for the
// prefixes that select them. Nil when there are none.
func (t *Table) Unapplied() []string {
	if t == nil || len(t.unapplied) == 0 {
		return nil
	}
	out := make([]string, 0, len(t.unapplied))
	for app, mw := range t.unapplied {
		out = append(out, app+" ("+strings.Join(mw, ", ")+")")
	}
	slices.Sort(out)
	return out
}

// Allowed reports whether on-demand TLS may obtain or load a certificate for name: the
// document names it exactly as a route host or an API host, and not as a passthrough
// route's (that application holds its own certificate). A name only a wildcard
// route covers is refused (the document names "*.shop.example.org", not
// "a.shop.example.org"), and so is any spelling that is not the canonical one: upper
// case, a trailing dot, a port, an IP literal, a wildcard.
func (t *Table) Allowed(name string) bool {
	return t != nil && t.names[name]
}

// APIBucket is what ApplicationOf answers for an API host: the platform apexes are no
// application's, and share their own part of the issuance budget. No application can
// be named so (an application's name is a DNS label).
const APIBucket = "(api)"

// ApplicationOf is the application whose route names name exactly (the names Allowed
// approves), or APIBucket for an API host; ok is false for a name Allowed refuses. A
// name's share of the issuance budget is its application's (Permission).
func (t *Table) ApplicationOf(name string) (app string, ok bool) {
	if t == nil || !t.names[name] {
		return "", false
	}
	if e := t.routes[name]; e != nil {
		return e.app, true
	}
	return APIBucket, true
}

// Lookup finds where a request for host (as the client sent it: any case, maybe a
// port, maybe one trailing dot) and escapedPath (the request target's path as sent,
// still percent-encoded) goes.
//
//   - The host is looked up exactly first; failing that its first label is replaced by
//     "*" and looked up once. Two labels below a wildcard match nothing.
//   - On an API apex a path under one of api.denied (in its raw or its normalised
//     spelling) matches nothing.
//   - A path map's first segment selects the target route in both its raw spelling
//     (up to the first "/" or "%2F") and its normalised one (percent-decoded, dot
//     segments and repeated slashes resolved); the normalised one wins when both hit
//     and differ. A target with nothing ready falls through to the other spelling's
//     target, then to the host's own route.
func (t *Table) Lookup(host, escapedPath string) Selection {
	if t == nil {
		return Selection{}
	}
	h := requestHost(host)
	if h == "" || strings.Contains(h, "*") || t.passthrough[h] {
		return Selection{}
	}
	e := t.routes[h]
	if e == nil && t.api[h] {
		if t.deniedPath(escapedPath) {
			return Selection{}
		}
		return Selection{Kind: KindAPI, Host: h, Dials: t.apiUps}
	}
	if e == nil {
		if label, rest, ok := strings.Cut(h, "."); ok && label != "" && label != "*" {
			e = t.routes["*."+rest]
		}
	}
	if e == nil {
		return Selection{}
	}
	sel := Selection{Kind: KindRoute, Host: e.host, Application: e.app, Dials: e.dials}
	if len(e.paths) == 0 {
		return sel
	}
	norm, raw := NormalisedFirstSegment(escapedPath), RawFirstSegment(escapedPath)
	for _, seg := range [2]string{norm, raw} {
		if te := e.paths[seg]; te != nil && (len(te.dials) > 0 || te.closed) {
			sel.Target, sel.Application, sel.Dials = te.host, te.app, te.dials
			return sel
		}
	}
	return sel
}

// requestHost is the lookup form of a request's Host: ASCII-lowercased, without a port
// and without one trailing dot (the same name in DNS). "" when it cannot be a document
// host (empty, an IP literal in brackets).
func requestHost(h string) string {
	if strings.HasPrefix(h, "[") {
		return ""
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	return routing.FoldHost(h)
}

// RawFirstSegment is the first segment of an escaped path as sent: the bytes after the
// leading "/" up to the next "/" or an encoded slash ("%2F", any case).
func RawFirstSegment(escaped string) string {
	s := strings.TrimPrefix(escaped, "/")
	end := len(s)
	if i := strings.IndexByte(s, '/'); i >= 0 {
		end = i
	}
	for i := 0; i+2 < end; i++ {
		if s[i] == '%' && s[i+1] == '2' && (s[i+2] == 'F' || s[i+2] == 'f') {
			end = i
			break
		}
	}
	return s[:end]
}

// NormalisedFirstSegment is the first segment of an escaped path once percent-decoded
// (every escape, "%2F" included) and with dot segments and repeated slashes resolved:
// what a decoding backend makes of it. A path that does not decode is taken as sent.
func NormalisedFirstSegment(escaped string) string {
	return firstSegment(normalisedPath(escaped))
}

func normalisedPath(escaped string) string {
	dec, err := url.PathUnescape(escaped)
	if err != nil {
		dec = escaped
	}
	return path.Clean("/" + dec)
}

func firstSegment(p string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return seg
}

// deniedPath reports whether a path is under one of api.denied in its raw or its
// normalised spelling. An entry ending in "/" denies that segment and everything below
// it (an encoded slash counts as one in the raw spelling); any other entry is a plain
// string prefix.
func (t *Table) deniedPath(escaped string) bool {
	norm := normalisedPath(escaped)
	for _, d := range t.denied {
		if deniedBy(d, norm) || deniedBy(d, escaped) {
			return true
		}
		if seg, ok := strings.CutSuffix(d, "/"); ok && hasPrefixFold(escaped, seg+"%2F") {
			return true
		}
	}
	return false
}

func deniedBy(entry, p string) bool {
	if seg, ok := strings.CutSuffix(entry, "/"); ok {
		return p == seg || strings.HasPrefix(p, entry)
	}
	return strings.HasPrefix(p, entry)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// refusedEscapes are the percent-encoded characters a request path may not carry (400),
// the same seven the shipped Traefik entry points refuse (deploy/traefik/traefik.yml,
// encodedCharacters): %2F and %5C make new segments in backends that decode them, %00
// truncates C strings, %3B starts servlet ";params", %25 double-decodes, %3F and %23
// cut the path short once decoded.
var refusedEscapes = []string{"%2f", "%5c", "%00", "%3b", "%25", "%3f", "%23"}

// RefusedEscape returns the first refused escape in an escaped path ("" for none).
func RefusedEscape(escaped string) string {
	for i := 0; i+2 < len(escaped); i++ {
		if escaped[i] != '%' {
			continue
		}
		e := strings.ToLower(escaped[i : i+3])
		for _, r := range refusedEscapes {
			if e == r {
				return escaped[i : i+3]
			}
		}
	}
	return ""
}
