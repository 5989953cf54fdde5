package routing

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

type validatorCase struct {
	in      string
	wantErr string // substring of the error; "" means valid
}

func runValidatorTable(t *testing.T, name string, validate func(field, s string) error, field string, cases []validatorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%.40q", name, tc.in), func(t *testing.T) {
			err := validate(field, tc.in)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("%s(%q) = %v, want valid", name, tc.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s(%q) accepted, want error containing %q", name, tc.in, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("%s(%q) = %q, want it to contain %q", name, tc.in, err, tc.wantErr)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != field || fe.Value != tc.in {
				t.Fatalf("%s(%q) = %#v, want *FieldError{Field: %q, Value: input}", name, tc.in, err, field)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("errors.Is(%v, ErrInvalid) = false", err)
			}
			if !strings.HasPrefix(err.Error(), field+" ") {
				t.Fatalf("error %q does not start with the field name %q", err, field)
			}
		})
	}
}

func TestValidateHost(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	// 4 labels of 63 + 3 dots = 255 > 253; 3 labels of 63 + one of 61 = 253.
	host253 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61)
	runValidatorTable(t, "ValidateHost", ValidateHost, "host", []validatorCase{
		{"shop.apps.example.com", ""},
		{"ti.to", ""},
		{"go.tito.io", ""},
		{"a-b.c-d.example", ""},
		{"xn--bcher-kva.example", ""},
		{"r3---sn-4g5e6nz7.googlevideo.com", ""},
		{"0.example.com", ""},
		{"apps.localhost", ""},
		{label63 + ".com", ""},
		{host253, ""},
		{"", "must not be empty"},
		{host253 + "b", "at most 253 bytes"},
		{strings.Repeat("a", 64) + ".com", "at most 63 bytes"},
		{"Foo.com", "must be lowercase"},
		{"shop.EXAMPLE.com", "must be lowercase"},
		{"bücher.example", "must be ASCII"},
		{"example.com.", "must not end with a dot"},
		{"example.com:443", "must not contain a port"},
		{"10.83.0.1", "must not be an IP literal"},
		{"::1", "must not be an IP literal"},
		{"[::1]", "must not be an IP literal"},
		{"fd00::1", "must not be an IP literal"},
		{"1.2.3", "must not be a number"},
		{"example.123", "must not be a number"},
		{"localhost", "at least two labels"},
		{"com", "at least two labels"},
		{"*.example.com", "must not contain a wildcard"},
		{"a..example.com", "empty label"},
		{".example.com", "empty label"},
		{"-shop.example.com", "must not start or end with '-'"},
		{"shop-.example.com", "must not start or end with '-'"},
		{"sh_op.example.com", "may contain only a-z, 0-9 and '-'"},
		{"shop example.com", "may contain only a-z, 0-9 and '-'"},
		{"shop.example.com/x", "may contain only a-z, 0-9 and '-'"},
		{"a`b.example.com", "may contain only a-z, 0-9 and '-'"},
	})
}

func TestValidateCustomHost(t *testing.T) {
	runValidatorTable(t, "ValidateCustomHost", ValidateCustomHost, "host", []validatorCase{
		{"ti.to", ""},
		{"*.shop.example.org", ""},
		{"*.example.org", ""},
		{"*.org", "wildcard must cover at least two labels"},
		{"*.", "wildcard must cover at least two labels"},
		{"*", "must not contain a wildcard"},
		{"*.*.example.org", "only as the whole first label"},
		{"a.*.example.org", "must not contain a wildcard"},
		{"*a.example.org", "must not contain a wildcard"},
		{"**.example.org", "must not contain a wildcard"},
		{"*.Shop.example.org", "must be lowercase"},
		{"*.example.org.", "must not end with a dot"},
		{"*.10.0.0.1", "must not be an IP literal"},
		{"*." + strings.Repeat("a.", 125) + "com", "at most 253 bytes"},
		// No claim, and so no route, may name a host under .invalid (RFC 6761): the
		// Traefik plugin's applied probe routes scafo-applied.invalid to noop@internal
		// and takes its 418 as "this configuration serves"; a tenant's route for that
		// host, whose backend answers 418, would make every ?wait=applied answer before
		// the write serves.
		{"scafo-applied.invalid", "must not be under .invalid"},
		{"x.scafo-applied.invalid", "must not be under .invalid"},
		{"*.scafo-applied.invalid", "must not be under .invalid"},
		{"a.b.invalid", "must not be under .invalid"},
		{"invalid.example.org", ""},
		{"shop.invalidx", ""},
		{"*.invalid.example.org", ""},
	})
}

func TestValidateLabel(t *testing.T) {
	runValidatorTable(t, "ValidateLabel", ValidateLabel, "application", []validatorCase{
		{"shop", ""},
		{"tito-classic", ""},
		{"vps-a", ""},
		{"0", ""},
		{"self", ""},
		{strings.Repeat("a", 63), ""},
		{"", "must not be empty"},
		{strings.Repeat("a", 64), "at most 63 bytes"},
		{"Shop", "must be lowercase"},
		{"shop.example", "single DNS label"},
		{"-shop", "must not start or end with '-'"},
		{"shop-", "must not start or end with '-'"},
		{"sh_op", "may contain only a-z, 0-9 and '-'"},
		{"shöp", "may contain only a-z, 0-9 and '-'"},
		{"a@b", "may contain only a-z, 0-9 and '-'"},
	})
}

func TestValidatePrefix(t *testing.T) {
	runValidatorTable(t, "ValidatePrefix", ValidatePrefix, "prefix", []validatorCase{
		{"paulca", ""},
		{"bigcorp", ""},
		{"0", ""},
		{"a.b_c~d-e", ""},
		{"a..", ""},
		{strings.Repeat("p", 63), ""},
		{"", "must not be empty"},
		{strings.Repeat("p", 64), "at most 63 bytes"},
		{".", "dot segment"},
		{"..", "dot segment"},
		{"/paulca", "without '/'"},
		{"paul/ca", "single segment"},
		{"Paulca", "must start with a-z or 0-9"},
		{"paulCA", "must be lowercase"},
		{"-paulca", "must start with a-z or 0-9"},
		{".paulca", "must start with a-z or 0-9"},
		{"paul%2Fca", "may contain only"},
		{"paul ca", "may contain only"},
		{"paul`ca", "may contain only"},
		{"paulça", "may contain only"},
	})
}

func TestValidateHealthPath(t *testing.T) {
	runValidatorTable(t, "ValidateHealthPath", ValidateHealthPath, "health.path", []validatorCase{
		{"/healthz", ""},
		{"/", ""},
		{"/v1/health/instances/shop", ""},
		{"/a%2Fb", ""},
		{"/status;v=1", ""},
		{"/a&b", ""},
		{"/" + strings.Repeat("a", 1023), ""},
		{"", "must not be empty"},
		{"/" + strings.Repeat("a", 1024), "at most 1024 bytes"},
		{"healthz", "absolute path"},
		{"/healthz?full=1", "no query or fragment"},
		{"/healthz#x", "no query or fragment"},
		{"/a%2", "invalid percent escape"},
		{"/a%zz", "invalid percent escape"},
		{"/a b", "RFC 3986 path characters"},
		{"/a`b", "RFC 3986 path characters"},
		{"/a\"b", "RFC 3986 path characters"},
		{"/ü", "RFC 3986 path characters"},
		{"/a/../b", "dot segment"},
		{"/.", "dot segment"},
		{"//x", "empty segment"},
	})
}

func TestValidateAddress(t *testing.T) {
	runValidatorTable(t, "ValidateAddress", ValidateAddress, "address", []validatorCase{
		{"10.83.0.1:24417", ""},
		{"[fd00::1]:80", ""},
		{"10.83.0.1", "must be ip:port"},
		{"vps-a:80", "must be ip:port"},
		{"10.83.0.1:0", "port must be 1..65535"},
		{"10.83.0.1:65536", "must be ip:port"},
		{"[fe80::1%eth0]:80", "IPv6 zone"},
		{"[FD00::1]:80", "canonical form"},
		{"[fd00:0::1]:80", "canonical form"},
	})
}

func TestFoldHostFoldsOnlyASCIICase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Shop.Example.COM", "shop.example.com"},
		{"shop.example.com", "shop.example.com"},
		{"ÄBC.example", "Äbc.example"},       // non-ASCII left alone, so validation refuses it
		{"\u212a.example", "\u212a.example"}, // Kelvin sign: no Unicode folding
		{"Example.com.", "example.com."},
		{" A ", " a "},
		{"", ""},
	} {
		if got := FoldHost(tc.in); got != tc.want {
			t.Errorf("FoldHost(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFieldErrorTruncatesLongValues(t *testing.T) {
	err := ValidateHost("host", strings.Repeat("A", 5000))
	if msg := err.Error(); len(msg) > 200 || !strings.Contains(msg, "(5000 bytes)") {
		t.Fatalf("error %q is not bounded or does not say how long the value was", msg)
	}
}

func TestInvalidFieldFindsWrappedFieldError(t *testing.T) {
	err := fmt.Errorf("claiming: %w", ValidateHost("host", "Foo.com"))
	field, ok := InvalidField(err)
	if !ok || field != "host" {
		t.Fatalf("InvalidField(%v) = %q, %v; want host, true", err, field, ok)
	}
	if _, ok := InvalidField(errors.New("disk on fire")); ok {
		t.Fatal("InvalidField found a field in a plain error")
	}
}

// TestHostsEndingInANumberAreRefused: a browser (WHATWG URL "ends in a number") and
// many resolvers parse a host whose last label is a number, decimal or 0x-hex, as an
// IPv4 address ("0x7f.0x1" is 127.0.0.1), so such a name could never reach its route.
func TestHostsEndingInANumberAreRefused(t *testing.T) {
	cases := []validatorCase{
		{"0x7f.0x1", "must not be a number"},
		{"1.2.3.4", "must not be an IP literal"},
		{"foo.123", "must not be a number"},
		{"foo.0x1f", "must not be a number"},
		{"foo.0xdeadbeef", "must not be a number"},
		{"foo.0x", "must not be a number"},
		{"foo.0", "must not be a number"},
		{"foo.017", "must not be a number"},
		{"0x7f.example.com", ""},
		{"foo.0xg", ""},
		{"foo.x1f", ""},
		{"foo.0x1f-a", ""},
		{"foo.1a", ""},
	}
	runValidatorTable(t, "ValidateHost", ValidateHost, "host", cases)
	var wild []validatorCase
	for _, tc := range cases {
		if tc.in != "1.2.3.4" {
			wild = append(wild, validatorCase{"*." + tc.in, tc.wantErr})
		}
	}
	runValidatorTable(t, "ValidateCustomHost", ValidateCustomHost, "host", wild)
}
