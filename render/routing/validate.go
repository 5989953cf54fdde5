package routing

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Limits of the names and prefixes the document carries.
const (
	// MaxHostLen is the longest host name, in bytes (RFC 1035, without the root dot).
	MaxHostLen = 253
	// MaxLabelLen is the longest DNS label, in bytes.
	MaxLabelLen = 63
	// MaxPrefixLen is the longest path prefix, in bytes.
	MaxPrefixLen = 63
	// MaxPaths is the most prefixes one host's path map may carry. Derivation drops
	// entries beyond it in sorted key order (and reports the drop); Decode refuses a
	// document that exceeds it.
	MaxPaths = 10000
	// MaxHealthPathLen is the longest health-check path, in bytes.
	MaxHealthPathLen = 1024
)

// ErrInvalid matches every *FieldError: errors.Is(err, ErrInvalid) tells a caller that
// err is bad input (a 400), not a failure of its own.
var ErrInvalid = errors.New("invalid value")

// FieldError is a value that broke a validation rule. Field names what was being
// validated ("host", "prefer", "routes[3].paths[\"paulca\"]"), Value is the offending
// input as given, and Rule is the rule it broke, written for a human.
//
// An HTTP layer answers {"error": "invalid " + Field, "detail": err.Error()}.
type FieldError struct {
	Field string
	Value string
	Rule  string
}

// Error reads like `host "Foo.com": must be lowercase (fold ASCII case first)`. Long
// values are cut to keep log lines bounded.
func (e *FieldError) Error() string {
	return e.Field + " " + quoteValue(e.Value) + ": " + e.Rule
}

// Is makes errors.Is(err, ErrInvalid) true for every *FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// InvalidField returns the field named by the first *FieldError in err's chain, and
// false when err carries none (so the failure is not the input's fault).
func InvalidField(err error) (string, bool) {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field, true
	}
	return "", false
}

const maxQuotedValue = 96

func quoteValue(v string) string {
	if len(v) <= maxQuotedValue {
		return strconv.Quote(v)
	}
	return strconv.Quote(v[:maxQuotedValue]) + fmt.Sprintf("… (%d bytes)", len(v))
}

func fieldErr(field, value, rule string) error {
	if rule == "" {
		return nil
	}
	return &FieldError{Field: field, Value: value, Rule: rule}
}

// FoldHost folds ASCII upper case to lower case and changes nothing else: no
// trimming, no trailing-dot removal, no Unicode mapping. Callers fold user input once,
// then validate the result; anything still non-canonical is refused, never rewritten.
func FoldHost(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.Map(func(r rune) rune {
				if 'A' <= r && r <= 'Z' {
					return r + ('a' - 'A')
				}
				return r
			}, s)
		}
	}
	return s
}

// ValidateHost checks that s is a canonical DNS host name: lowercase ASCII LDH labels
// (internationalised names as their "xn--" A-labels), each 1..63 bytes and neither
// starting nor ending with '-', at least two labels, at most 253 bytes, no trailing
// dot, no port, no IP literal, no wildcard, and a last label that is not a number
// (decimal "foo.123" or hex "foo.0x1f", "0x7f.0x1"): a browser reads such a name as an
// IPv4 address, so it could never reach its route. The input must already be canonical: fold
// it with FoldHost first; ValidateHost never rewrites.
//
// A-labels are checked for syntax only, not decoded as punycode.
func ValidateHost(field, s string) error {
	return fieldErr(field, s, hostRule(s))
}

// ValidateCustomHost accepts what a custom-domain claim may name: a host (see
// ValidateHost), or a one-label wildcard "*." + host, where host has at least two
// labels ("*.shop.example.org", never "*.org", "*.*.example.org" or "a.*.example.org").
//
// A name under the reserved top-level domain .invalid (RFC 6761) is refused: it is
// never a customer's, and the Traefik plugin's applied probe routes
// scafo-applied.invalid to noop@internal and takes its 418 as "applied"; a tenant's
// route for that host would answer in its place.
func ValidateCustomHost(field, s string) error {
	if err := validateCustomHost(field, s); err != nil {
		return err
	}
	if strings.HasSuffix(s, "."+reservedTLD) {
		return fieldErr(field, s, ruleReservedTLD)
	}
	return nil
}

func validateCustomHost(field, s string) error {
	rest, wild := strings.CutPrefix(s, "*.")
	if !wild {
		return ValidateHost(field, s)
	}
	if len(s) > MaxHostLen {
		return fieldErr(field, s, "must be at most 253 bytes")
	}
	if strings.Contains(rest, "*") {
		return fieldErr(field, s, `a wildcard is allowed only as the whole first label ("*.example.org")`)
	}
	if rest == "" {
		return fieldErr(field, s, "a wildcard must cover at least two labels (\"*.example.org\")")
	}
	rule := hostRule(rest)
	if rule == ruleTwoLabels {
		rule = "a wildcard must cover at least two labels (\"*.example.org\")"
	}
	return fieldErr(field, s, rule)
}

const (
	reservedTLD     = "invalid"
	ruleReservedTLD = "must not be under .invalid (RFC 6761 reserves it; the plugin's applied probe uses scafo-applied.invalid)"
)

// IsWildcard reports whether host is a one-label wildcard ("*.example.org").
func IsWildcard(host string) bool { return strings.HasPrefix(host, "*.") }

// ValidateLabel checks that s is one DNS label, the form of application, node and
// account names: lowercase a-z, 0-9 and '-', 1..63 bytes, neither starting nor ending
// with '-'.
func ValidateLabel(field, s string) error {
	if s == "" {
		return fieldErr(field, s, "must not be empty")
	}
	if strings.Contains(s, ".") {
		return fieldErr(field, s, "must be a single DNS label (no '.')")
	}
	return fieldErr(field, s, labelRule(s))
}

// ValidatePrefix checks a path-map key: a bare first path segment matching
// [a-z0-9][a-z0-9._~-]*, at most 63 bytes, never "." or "..". No slash: "paulca",
// never "/paulca".
func ValidatePrefix(field, s string) error {
	return fieldErr(field, s, prefixRule(s))
}

// ValidateHealthPath checks an application's health-check path: an absolute URL path
// of at most 1024 bytes made of RFC 3986 path characters, with valid percent escapes,
// no query or fragment, no empty, "." or ".." segment.
func ValidateHealthPath(field, s string) error {
	return fieldErr(field, s, healthPathRule(s))
}

// ValidateAddress checks an upstream address: "ip:port" in canonical netip form
// ("10.83.0.1:24417", "[fd00::1]:80"), port 1..65535, no IPv6 zone.
func ValidateAddress(field, s string) error {
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		return fieldErr(field, s, "must be ip:port")
	case ap.Addr().Zone() != "":
		return fieldErr(field, s, "must not carry an IPv6 zone")
	case ap.Port() == 0:
		return fieldErr(field, s, "port must be 1..65535")
	}
	var buf [64]byte
	if string(ap.AppendTo(buf[:0])) != s {
		return fieldErr(field, s, "must be in canonical form "+strconv.Quote(ap.String()))
	}
	return nil
}

const ruleTwoLabels = "must have at least two labels"

func hostRule(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxHostLen {
		return "must be at most 253 bytes"
	}
	upper, digitsAndDots := false, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return "must be ASCII (write an internationalised name as its xn-- A-label)"
		}
		if 'A' <= c && c <= 'Z' {
			upper = true
		}
		if c != '.' && (c < '0' || c > '9') {
			digitsAndDots = false
		}
	}
	if upper {
		return "must be lowercase (fold ASCII case first)"
	}
	if strings.HasSuffix(s, ".") {
		return "must not end with a dot"
	}
	if strings.ContainsAny(s, "[]") {
		return "must not be an IP literal"
	}
	if strings.Contains(s, ":") {
		if _, err := netip.ParseAddr(s); err == nil {
			return "must not be an IP literal"
		}
		return "must not contain a port"
	}
	if strings.Contains(s, "*") {
		return "must not contain a wildcard"
	}
	if digitsAndDots {
		if _, err := netip.ParseAddr(s); err == nil {
			return "must not be an IP literal"
		}
	}
	labels := 0
	last := ""
	for label := range strings.SplitSeq(s, ".") {
		if label == "" {
			return "must not contain an empty label"
		}
		if r := labelRule(label); r != "" {
			return "label " + strconv.Quote(label) + " " + r
		}
		labels++
		last = label
	}
	if labels < 2 {
		return ruleTwoLabels
	}
	if isNumber(last) {
		return ruleNumericTLD
	}
	return ""
}

const ruleNumericTLD = "top-level label must not be a number (all digits, or 0x and hex digits): browsers and resolvers read such a name as an IPv4 address"

func labelRule(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxLabelLen {
		return "must be at most 63 bytes"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-':
		case 'A' <= c && c <= 'Z':
			return "must be lowercase (fold ASCII case first)"
		default:
			return "may contain only a-z, 0-9 and '-'"
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return "must not start or end with '-'"
	}
	return ""
}

func prefixRule(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxPrefixLen {
		return "must be at most 63 bytes"
	}
	if s == "." || s == ".." {
		return "must not be a dot segment"
	}
	if c := s[0]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
		if c == '/' {
			return "must be a bare segment without '/' (\"paulca\", not \"/paulca\")"
		}
		return "must start with a-z or 0-9"
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '_', c == '~', c == '-':
		case c == '/':
			return "must be a single segment (no '/')"
		case 'A' <= c && c <= 'Z':
			return "must be lowercase"
		default:
			return "may contain only a-z, 0-9, '.', '_', '~' and '-'"
		}
	}
	return ""
}

func healthPathRule(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxHealthPathLen {
		return "must be at most 1024 bytes"
	}
	if s[0] != '/' {
		return "must be an absolute path starting with '/'"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "has an invalid percent escape"
			}
		case c == '?' || c == '#':
			return "must be a path only (no query or fragment)"
		default:
			return "may contain only RFC 3986 path characters"
		}
	}
	for seg := range strings.SplitSeq(s[1:], "/") {
		switch seg {
		case ".", "..":
			return "must not contain a dot segment"
		}
	}
	if strings.Contains(s, "//") {
		return "must not contain an empty segment"
	}
	return ""
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isNumber reports whether a label is what the WHATWG URL parser's "ends in a number"
// check, and inet_aton-style resolvers, take for an IPv4 number part: all decimal (or
// octal) digits, or "0x" followed by hex digits, none included ("0x" is zero). Labels
// here are lowercase, so "0X" never reaches this.
func isNumber(s string) bool {
	if hex, ok := strings.CutPrefix(s, "0x"); ok {
		for i := 0; i < len(hex); i++ {
			if !isHex(hex[i]) {
				return false
			}
		}
		return true
	}
	return allDigits(s)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
