package render

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/traefik/genconf/dynamic"
)

// encodeConfiguration writes cfg exactly as encoding/json would (an Encoder with
// SetEscapeHTML(false), without the trailing newline), without reflection: sorted map
// keys, struct fields in declaration order, the same omitempty rules, the same string
// escaping. Rendering a 10 000-route fleet spends most of its time in encoding/json's
// reflection and map-key sorting otherwise. A field this encoder does not know (a genconf
// field the render never sets) makes it fall back to encoding/json, so the output is
// always what encoding/json writes; TestFastEncoderMatchesEncodingJSON holds it to that
// on every golden case and on generated fleets, and TestFastEncoderFieldInventory holds
// every field of every type it meets to encoderFields (fail closed: a field added to a
// genconf type fails that test until the encoder writes or delegates it).
func encodeConfiguration(cfg *Configuration) ([]byte, error) {
	if !fastEncodable(cfg) {
		return marshalStd(cfg)
	}
	if cfg.HTTP == nil && cfg.TLS == nil {
		return []byte("{}"), nil
	}
	size := 64
	if cfg.HTTP != nil {
		size += 256 * (len(cfg.HTTP.Routers) + len(cfg.HTTP.Services))
	}
	if cfg.TLS != nil {
		size += 4096 * len(cfg.TLS.Certificates)
	}
	e := encoder{buf: make([]byte, 0, size)}
	e.raw("{")
	if cfg.HTTP != nil {
		e.raw(`"http":{`)
		hf := true
		if len(cfg.HTTP.Routers) > 0 {
			hf = false
			encodeMap(&e, "routers", cfg.HTTP.Routers, e.router)
		}
		if len(cfg.HTTP.Services) > 0 {
			if !hf {
				e.raw(",")
			}
			hf = false
			encodeMap(&e, "services", cfg.HTTP.Services, e.service)
		}
		if len(cfg.HTTP.Middlewares) > 0 {
			if !hf {
				e.raw(",")
			}
			encodeMap(&e, "middlewares", cfg.HTTP.Middlewares, e.middleware)
		}
		e.raw("}")
	}
	if cfg.TLS != nil {
		if cfg.HTTP != nil {
			e.raw(",")
		}
		e.tlsConfiguration(cfg.TLS)
	}
	e.raw("}")
	return e.buf, nil
}

// tlsConfiguration writes `"tls":{...}` (fleet certificates: certFile and keyFile of
// each, in order).
func (e *encoder) tlsConfiguration(t *TLSConfiguration) {
	e.raw(`"tls":{`)
	if len(t.Certificates) > 0 {
		e.raw(`"certificates":[`)
		for i, c := range t.Certificates {
			if i > 0 {
				e.raw(",")
			}
			e.raw("{")
			first := true
			if c.CertFile != "" {
				e.field(&first, "certFile")
				e.str(c.CertFile)
			}
			if c.KeyFile != "" {
				e.field(&first, "keyFile")
				e.str(c.KeyFile)
			}
			e.raw("}")
		}
		e.raw("]")
	}
	e.raw("}")
}

// marshalStd is the reference encoding.
func marshalStd(cfg *Configuration) ([]byte, error) {
	var buf []byte
	w := &appendWriter{b: &buf}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	if n := len(buf); n > 0 && buf[n-1] == '\n' {
		buf = buf[:n-1]
	}
	return buf, nil
}

type appendWriter struct{ b *[]byte }

func (w *appendWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// fastEncodable reports whether every value set in cfg is one encodeConfiguration
// writes; anything else goes to encoding/json.
func fastEncodable(cfg *Configuration) bool {
	if cfg.TCP != nil {
		return false // passthrough routes: few, and encoding/json's business
	}
	if cfg.TLS != nil {
		for _, c := range cfg.TLS.Certificates {
			if c == nil || len(c.Stores) > 0 {
				return false
			}
		}
	}
	if cfg.HTTP == nil {
		return true
	}
	for _, r := range cfg.HTTP.Routers {
		if r == nil || (r.TLS != nil && r.TLS.Options != "") {
			return false
		}
	}
	for _, m := range cfg.HTTP.Middlewares {
		if m == nil {
			return false
		}
	}
	for _, s := range cfg.HTTP.Services {
		if s == nil {
			return false
		}
		if lb := s.LoadBalancer; lb != nil {
			if lb.Sticky != nil || lb.ResponseForwarding != nil || lb.ServersTransport != "" {
				return false
			}
			if hc := lb.HealthCheck; hc != nil && len(hc.Headers) > 0 {
				return false
			}
		}
	}
	return true
}

// fieldUse is what the fast encoder does with one JSON field of a struct it meets.
type fieldUse uint8

const (
	// written: the encoder writes the field itself, as encoding/json would.
	written fieldUse = iota + 1
	// delegated: the encoder does not write the field; a non-zero value makes
	// fastEncodable false, so the whole configuration goes to encoding/json.
	delegated
)

// encoderFields declares, for every struct type reachable from Configuration through
// fields the encoder writes, what it does with each exported JSON field (by JSON name,
// embedded structs under their own type). It is the encoder's inventory, not consulted
// while encoding: TestFastEncoderFieldInventory walks the types with reflect and fails
// on a field missing here (a field added to a genconf type would otherwise be dropped
// without a word) or listed here but gone, and for every field sets it alone and
// checks that a written field is written by the fast path, byte-identical to
// encoding/json, and that a delegated one falls back. Fields under a delegated field
// are encoding/json's business and are not listed.
//
// Changing the encoder means changing this table, and the other way round.
var encoderFields = map[string]map[string]fieldUse{
	"render.Configuration":     {"http": written, "tcp": delegated, "tls": written},
	"render.TLSConfiguration":  {"certificates": written},
	"tls.CertAndStores":        {"stores": delegated},
	"tls.Certificate":          {"certFile": written, "keyFile": written},
	"render.HTTPConfiguration": {"routers": written, "services": written, "middlewares": written},
	"render.Middleware":        {"retry": written},
	"dynamic.Retry":            {"attempts": written, "initialInterval": written},
	"dynamic.Router": {
		"entryPoints": written, "middlewares": written, "service": written,
		"rule": written, "priority": written, "tls": written,
	},
	"dynamic.RouterTLSConfig": {"options": delegated, "certResolver": written, "domains": written},
	"types.Domain":            {"main": written, "sans": written},
	"render.Service":          {"loadBalancer": written, "failover": written},
	"render.LoadBalancer":     {"passiveHealthCheck": written},
	"dynamic.ServersLoadBalancer": {
		"sticky": delegated, "servers": written, "healthCheck": written,
		"passHostHeader": written, "responseForwarding": delegated, "serversTransport": delegated,
	},
	"dynamic.Server": {"url": written},
	"dynamic.ServerHealthCheck": {
		"scheme": written, "path": written, "method": written, "port": written, "interval": written,
		"timeout": written, "hostname": written, "followRedirects": written, "headers": delegated,
	},
	"render.PassiveHealthCheck": {"failureWindow": written, "maxFailedAttempts": written},
	"dynamic.Failover":          {"service": written, "fallback": written, "healthCheck": written},
	"dynamic.HealthCheck":       {},
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // encoding/json sorts map keys by their string form, bytewise
	return keys
}

type encoder struct{ buf []byte }

// encodeMap writes `"name":{...}` with m's entries in sorted key order, each value
// written by value.
func encodeMap[V any](e *encoder, name string, m map[string]V, value func(V)) {
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, name...)
	e.raw(`":{`)
	for i, k := range sortedMapKeys(m) {
		if i > 0 {
			e.raw(",")
		}
		e.str(k)
		e.raw(":")
		value(m[k])
	}
	e.raw("}")
}

func (e *encoder) raw(s string) { e.buf = append(e.buf, s...) }

// field writes `,"name":` (or without the comma for the first field of an object).
func (e *encoder) field(first *bool, name string) {
	if !*first {
		e.buf = append(e.buf, ',')
	}
	*first = false
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, '"', ':')
}

func (e *encoder) strings(ss []string) {
	e.buf = append(e.buf, '[')
	for i, s := range ss {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(s)
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) router(r *dynamic.Router) {
	e.buf = append(e.buf, '{')
	first := true
	if len(r.EntryPoints) > 0 {
		e.field(&first, "entryPoints")
		e.strings(r.EntryPoints)
	}
	if len(r.Middlewares) > 0 {
		e.field(&first, "middlewares")
		e.strings(r.Middlewares)
	}
	if r.Service != "" {
		e.field(&first, "service")
		e.str(r.Service)
	}
	if r.Rule != "" {
		e.field(&first, "rule")
		e.str(r.Rule)
	}
	if r.Priority != 0 {
		e.field(&first, "priority")
		e.buf = strconv.AppendInt(e.buf, int64(r.Priority), 10)
	}
	if t := r.TLS; t != nil {
		e.field(&first, "tls")
		e.buf = append(e.buf, '{')
		tf := true
		if t.CertResolver != "" {
			e.field(&tf, "certResolver")
			e.str(t.CertResolver)
		}
		if len(t.Domains) > 0 {
			e.field(&tf, "domains")
			e.buf = append(e.buf, '[')
			for i, d := range t.Domains {
				if i > 0 {
					e.buf = append(e.buf, ',')
				}
				e.buf = append(e.buf, '{')
				df := true
				if d.Main != "" {
					e.field(&df, "main")
					e.str(d.Main)
				}
				if len(d.SANs) > 0 {
					e.field(&df, "sans")
					e.strings(d.SANs)
				}
				e.buf = append(e.buf, '}')
			}
			e.buf = append(e.buf, ']')
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
}

func (e *encoder) middleware(m *Middleware) {
	e.buf = append(e.buf, '{')
	if rt := m.Retry; rt != nil {
		e.raw(`"retry":{`)
		rf := true
		if rt.Attempts != 0 {
			e.field(&rf, "attempts")
			e.buf = strconv.AppendInt(e.buf, int64(rt.Attempts), 10)
		}
		if rt.InitialInterval != "" {
			e.field(&rf, "initialInterval")
			e.str(rt.InitialInterval)
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
}

func (e *encoder) service(s *Service) {
	e.buf = append(e.buf, '{')
	first := true
	if lb := s.LoadBalancer; lb != nil {
		e.field(&first, "loadBalancer")
		e.buf = append(e.buf, '{')
		lf := true
		if len(lb.Servers) > 0 {
			e.field(&lf, "servers")
			e.buf = append(e.buf, '[')
			for i, sv := range lb.Servers {
				if i > 0 {
					e.buf = append(e.buf, ',')
				}
				e.buf = append(e.buf, '{')
				if sv.URL != "" {
					e.raw(`"url":`)
					e.str(sv.URL)
				}
				e.buf = append(e.buf, '}')
			}
			e.buf = append(e.buf, ']')
		}
		if hc := lb.HealthCheck; hc != nil {
			e.field(&lf, "healthCheck")
			e.healthCheck(hc)
		}
		e.field(&lf, "passHostHeader") // no omitempty in genconf
		e.boolPtr(lb.PassHostHeader)
		if p := lb.PassiveHealthCheck; p != nil {
			e.field(&lf, "passiveHealthCheck")
			e.buf = append(e.buf, '{')
			pf := true
			if p.FailureWindow != "" {
				e.field(&pf, "failureWindow")
				e.str(p.FailureWindow)
			}
			if p.MaxFailedAttempts != 0 {
				e.field(&pf, "maxFailedAttempts")
				e.buf = strconv.AppendInt(e.buf, int64(p.MaxFailedAttempts), 10)
			}
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, '}')
	}
	if f := s.Failover; f != nil {
		e.field(&first, "failover")
		e.buf = append(e.buf, '{')
		ff := true
		if f.Service != "" {
			e.field(&ff, "service")
			e.str(f.Service)
		}
		if f.Fallback != "" {
			e.field(&ff, "fallback")
			e.str(f.Fallback)
		}
		if f.HealthCheck != nil {
			e.field(&ff, "healthCheck")
			e.raw("{}")
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
}

func (e *encoder) healthCheck(hc *dynamic.ServerHealthCheck) {
	e.buf = append(e.buf, '{')
	f := true
	for _, kv := range [...]struct{ k, v string }{
		{"scheme", hc.Scheme}, {"path", hc.Path}, {"method", hc.Method},
	} {
		if kv.v != "" {
			e.field(&f, kv.k)
			e.str(kv.v)
		}
	}
	if hc.Port != 0 {
		e.field(&f, "port")
		e.buf = strconv.AppendInt(e.buf, int64(hc.Port), 10)
	}
	for _, kv := range [...]struct{ k, v string }{
		{"interval", hc.Interval}, {"timeout", hc.Timeout}, {"hostname", hc.Hostname},
	} {
		if kv.v != "" {
			e.field(&f, kv.k)
			e.str(kv.v)
		}
	}
	e.field(&f, "followRedirects") // no omitempty in genconf
	e.boolPtr(hc.FollowRedirects)
	e.buf = append(e.buf, '}')
}

func (e *encoder) boolPtr(b *bool) {
	switch {
	case b == nil:
		e.raw("null")
	case *b:
		e.raw("true")
	default:
		e.raw("false")
	}
}

const hexDigits = "0123456789abcdef"

// str appends s as a JSON string exactly as encoding/json does with HTML escaping off:
// '"' and '\\' escaped, control characters as \n \r \t or \u00XX, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped.
func (e *encoder) str(s string) {
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			e.buf = append(e.buf, s[start:i]...)
			switch b {
			case '\\', '"':
				e.buf = append(e.buf, '\\', b)
			case '\b':
				e.buf = append(e.buf, '\\', 'b')
			case '\f':
				e.buf = append(e.buf, '\\', 'f')
			case '\n':
				e.buf = append(e.buf, '\\', 'n')
			case '\r':
				e.buf = append(e.buf, '\\', 'r')
			case '\t':
				e.buf = append(e.buf, '\\', 't')
			default:
				e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			e.buf = append(e.buf, s[start:i]...)
			e.buf = append(e.buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			e.buf = append(e.buf, s[start:i]...)
			e.buf = append(e.buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
}
