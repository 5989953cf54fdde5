package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/traefik/genconf/dynamic"
)

// The applied probe of an HTTP-provider Traefik (docs/design.md §11): Traefik's HTTP
// provider reports nothing of what it applied, so the body served to an ingress that
// declares its own entry point's address carries two routers and two services that
// make Traefik itself call the node once it serves that body:
//
//   - service applied-check: a load balancer whose one server is the declared entry
//     point, health-checked at AppliedPath(ingress, revision, mac) with host AppliedHost,
//     every AppliedInterval; router applied-check references it (Traefik v3.6.12 builds,
//     and health-checks, only the services a router references: routerfactory.go
//     CreateRouters builds the routers' handlers, then LaunchHealthCheck starts the
//     checkers the service manager registered while building them) with a rule no request
//     can match;
//   - router applied-callback: Host(AppliedHost) && Path(AppliedPath(…)), the highest
//     priority a provider may set, to service applied-callback, a load balancer whose one
//     server is the node the ingress polled.
//
// The check's request enters the entry point like any request: it reaches the node only
// through the callback router, which is in this body alone (its path names the revision),
// so the node hears the callback only once the entry point serves this configuration.
// Traefik launches the checks in CreateRouters before it switches the entry points
// (cmd/traefik switchRouter), and checks first one interval after launch; a check that
// still meets the previous configuration gets its 404 and is retried an interval later.
//
// Names: kind "applied-", which no other router or service name uses (names.go: router
// kinds host-, path-, paths-, guard-, api-, deny-, acme-; services app-…, api…, deny), so
// they never collide with an application's.

const (
	// AppliedHost is the host of the probe's requests (reserved: .invalid never resolves).
	AppliedHost = "scafo-applied.invalid"
	// AppliedPathPrefix is where the node hears callbacks:
	// AppliedPathPrefix + <ingress>/<revision>/<mac>.
	AppliedPathPrefix = "/v1/ingress/applied/"
	// AppliedInterval is the check's interval: the callback comes at most this long after
	// Traefik serves the configuration (and every interval after, while it serves it).
	AppliedInterval = "250ms"
	appliedTimeout  = "2s"

	routerAppliedCheck    = "applied-check"
	routerAppliedCallback = "applied-callback"
	svcAppliedCheck       = "applied-check"
	svcAppliedCallback    = "applied-callback"
	// appliedNever is the check router's path: the rule asks for it and for its absence.
	appliedNever = "/scafo-applied-check"
)

// AppliedProbe is what the probe objects of one body depend on.
type AppliedProbe struct {
	// Ingress is the ingress's name (its X-Scafo-Ingress), Revision the revision of the
	// body, MAC the node's MAC over both (lowercase hex).
	Ingress, Revision, MAC string
	// EntryPoint is the base URL of the Traefik entry point the check asks
	// ("http://127.0.0.1:80"); Node the base URL of the node it polled.
	EntryPoint, Node string
}

// AppliedPath is the path of the callback of ingress for revision, signed mac.
func AppliedPath(ingress, revision, mac string) string {
	return AppliedPathPrefix + ingress + "/" + revision + "/" + mac
}

// ValidateBaseURL checks an http(s) base URL: scheme, host, and nothing else (no
// credentials, path beyond "/", query or fragment). It returns the URL without a
// trailing slash.
func ValidateBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("%.80q: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%.80q: want an http:// or https:// URL", raw)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%.80q: no host", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || u.Opaque != "" || (u.Path != "" && u.Path != "/"):
		return "", fmt.Errorf("%.80q: want scheme://host:port alone (no credentials, path, query or fragment)", raw)
	}
	for _, c := range u.Host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:[]", c)) {
			return "", fmt.Errorf("%.80q: host: want letters, digits, '.', '-', ':' and IPv6 brackets", raw)
		}
	}
	if p := u.Port(); p != "" {
		if n := atoiPort(p); n < 1 || n > 65535 {
			return "", fmt.Errorf("%.80q: port: want 1..65535", raw)
		}
	}
	return u.Scheme + "://" + u.Host, nil
}

func atoiPort(s string) int {
	if len(s) > 5 {
		return -1
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func (p AppliedProbe) validate() error {
	if p.Ingress == "" || len(p.Ingress) > 63 {
		return fmt.Errorf("applied probe: ingress %q: want 1..63 bytes", p.Ingress)
	}
	for i := 0; i < len(p.Ingress); i++ {
		c := p.Ingress[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("applied probe: ingress %q: want [a-z0-9.-]", p.Ingress)
		}
	}
	if !lowerHex(p.Revision) || !lowerHex(p.MAC) {
		return errors.New("applied probe: revision and mac must be lowercase hex")
	}
	for _, u := range []string{p.EntryPoint, p.Node} {
		if v, err := ValidateBaseURL(u); err != nil || v != u {
			return fmt.Errorf("applied probe: %q: want a base URL without a trailing slash", u)
		}
	}
	return nil
}

func lowerHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// appliedObjects are the probe's routers and services, encoded.
func appliedObjects(p AppliedProbe) (routers, services map[string][]byte, err error) {
	path := AppliedPath(p.Ingress, p.Revision, p.MAC)
	never := "Host(`" + AppliedHost + "`) && Path(`" + appliedNever + "`) && !Path(`" + appliedNever + "`)"
	rs := map[string]*dynamic.Router{
		routerAppliedCheck: {Service: svcAppliedCheck, Rule: never, Priority: 1},
		routerAppliedCallback: {Service: svcAppliedCallback, Rule: "Host(`" + AppliedHost + "`) && Path(`" + path + "`)",
			Priority: PriorityACMEChallenge},
	}
	ss := map[string]*dynamic.Service{
		svcAppliedCheck: {LoadBalancer: &dynamic.ServersLoadBalancer{
			Servers: []dynamic.Server{{URL: p.EntryPoint}},
			HealthCheck: &dynamic.ServerHealthCheck{Path: path, Interval: AppliedInterval, Timeout: appliedTimeout,
				Hostname: AppliedHost, FollowRedirects: ptr(false)},
			// Never Host: scafo-applied.invalid on what it forwards: were a request to
			// match the check router, it could not loop back into it.
			PassHostHeader: ptr(false),
		}},
		svcAppliedCallback: {LoadBalancer: &dynamic.ServersLoadBalancer{
			Servers:        []dynamic.Server{{URL: p.Node}},
			PassHostHeader: ptr(false),
		}},
	}
	routers, services = map[string][]byte{}, map[string][]byte{}
	for k, v := range rs {
		if routers[k], err = json.Marshal(v); err != nil {
			return nil, nil, err
		}
	}
	for k, v := range ss {
		if services[k], err = json.Marshal(v); err != nil {
			return nil, nil, err
		}
	}
	return routers, services, nil
}

// WithAppliedProbe returns body (a Traefik dynamic configuration as the render writes
// it) with the probe's routers and services added; body is not modified. The result is
// a function of body and p alone. It fails when body is not a JSON object whose
// http.routers and http.services are objects, or already holds a name of the probe's.
func WithAppliedProbe(body []byte, p AppliedProbe) ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	routers, services, err := appliedObjects(p)
	if err != nil {
		return nil, err
	}
	top, err := members(body, 0)
	if err != nil {
		return nil, fmt.Errorf("applied probe: body: %w", err)
	}
	var edits []edit
	if h, ok := top.find("http"); ok {
		sec, err := members(body, h.val)
		if err != nil {
			return nil, fmt.Errorf("applied probe: http: %w", err)
		}
		var add []byte
		for _, part := range []struct {
			key  string
			objs map[string][]byte
		}{{"routers", routers}, {"services", services}} {
			m, ok := sec.find(part.key)
			if !ok {
				add = append(add, ',')
				add = appendMember(add, part.key, objectOf(part.objs))
				continue
			}
			inner, err := members(body, m.val)
			if err != nil {
				return nil, fmt.Errorf("applied probe: http.%s: %w", part.key, err)
			}
			for name := range part.objs {
				if _, taken := inner.find(name); taken {
					return nil, fmt.Errorf("applied probe: http.%s already holds %s", part.key, name)
				}
			}
			ins := entries(part.objs)
			if len(inner.list) > 0 {
				ins = append(ins, ',')
			}
			edits = append(edits, edit{at: m.val + 1, text: ins})
		}
		if len(add) > 0 {
			if len(sec.list) == 0 {
				add = add[1:]
			}
			edits = append(edits, edit{at: sec.end - 1, text: add})
		}
	} else {
		var add []byte
		add = appendMember(add, "http", []byte(`{"routers":`+string(objectOf(routers))+`,"services":`+string(objectOf(services))+`}`))
		if len(top.list) > 0 {
			add = append(add, ',')
		}
		edits = append(edits, edit{at: top.start + 1, text: add})
	}
	out := make([]byte, 0, len(body)+2048)
	last := 0
	for _, e := range sortEdits(edits) {
		out = append(out, body[last:e.at]...)
		out = append(out, e.text...)
		last = e.at
	}
	return append(out, body[last:]...), nil
}

type edit struct {
	at   int
	text []byte
}

func sortEdits(es []edit) []edit {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].at < es[j-1].at; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	return es
}

// entries writes objs as `"k":v,…` in key order (no braces).
func entries(objs map[string][]byte) []byte {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	var b []byte
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMember(b, k, objs[k])
	}
	return b
}

func objectOf(objs map[string][]byte) []byte {
	return append(append([]byte{'{'}, entries(objs)...), '}')
}

func appendMember(b []byte, key string, val []byte) []byte {
	k, _ := json.Marshal(key)
	b = append(b, k...)
	b = append(b, ':')
	return append(b, val...)
}

// object is the members of one JSON object in a body: start and end bound it
// ({ at start, end just past }).
type object struct {
	start, end int
	list       []member
}

// member is one member: key is the decoded key, val the offset of its value.
type member struct {
	key string
	val int
}

func (o object) find(key string) (member, bool) {
	for _, m := range o.list {
		if m.key == key {
			return m, true
		}
	}
	return member{}, false
}

// members scans the JSON object at b[i:] (after whitespace), without decoding values.
func members(b []byte, i int) (object, error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return object{}, fmt.Errorf("offset %d: want an object", i)
	}
	o := object{start: i}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		o.end = i + 1
		return o, nil
	}
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return object{}, fmt.Errorf("offset %d: want a key", i)
		}
		ke, err := skipString(b, i)
		if err != nil {
			return object{}, err
		}
		var key string
		if err := json.Unmarshal(b[i:ke], &key); err != nil {
			return object{}, fmt.Errorf("offset %d: key: %v", i, err)
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return object{}, fmt.Errorf("offset %d: want ':'", i)
		}
		i = skipSpace(b, i+1)
		o.list = append(o.list, member{key: key, val: i})
		if i, err = skipValue(b, i); err != nil {
			return object{}, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return object{}, errors.New("unterminated object")
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			o.end = i + 1
			return o, nil
		default:
			return object{}, fmt.Errorf("offset %d: want ',' or '}'", i)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset just past the string starting at b[i] ('"').
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("unterminated string")
}

// skipValue returns the offset just past the JSON value starting at b[i] (nesting is
// counted outside strings; the value itself is not checked beyond that: the body is
// the render's).
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("want a value")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated value")
	default:
		j := i
		for j < len(b) && !strings.ContainsRune(",}] \n\t\r", rune(b[j])) {
			j++
		}
		if j == i {
			return 0, fmt.Errorf("offset %d: want a value", i)
		}
		return j, nil
	}
}
