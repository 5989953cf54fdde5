// Package rfc2136 is a libdns provider (github.com/libdns/libdns) that edits zones by
// RFC 2136 dynamic updates signed with TSIG (RFC 8945), over github.com/miekg/dns. It
// works with any server that takes signed updates: BIND, Knot, PowerDNS, and many
// hosted DNS services. It is the fleet's first DNS-01 provider (node/fleetcerts);
// another libdns provider plugs in the same way (certmagic.DNSProvider).
//
// A Provider writes only inside the zones it is given: a call for any other zone, or a
// record whose name falls outside its zone, is refused before anything is sent. The
// TSIG secret never appears in an error, a log line or the Provider's printed form.
package rfc2136

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/libdns/libdns"
	"github.com/miekg/dns"
)

// Sentinel errors (wrapped with what was being done).
var (
	// ErrZone: the zone is not one this Provider may write.
	ErrZone = errors.New("zone not allowed for this provider")
	// ErrName: the record's name is outside the zone.
	ErrName = errors.New("record name outside the zone")
	// ErrRefused: the server answered the update with an error code (TSIG refused,
	// not authoritative, policy).
	ErrRefused = errors.New("update refused by the DNS server")
	// ErrType: a record type this provider does not write.
	ErrType = errors.New("record type not supported")
)

// Algorithms accepted for TSIG.
var algorithms = map[string]string{
	"hmac-sha256": dns.HmacSHA256, "hmac-sha384": dns.HmacSHA384, "hmac-sha512": dns.HmacSHA512,
	"hmac-sha224": dns.HmacSHA224, "hmac-sha1": dns.HmacSHA1,
}

// Provider edits zones on one primary server.
type Provider struct {
	// Server is the primary's host:port (port 53 when omitted).
	Server string
	// Zones are the zones this provider may edit (FQDNs; a trailing dot is optional).
	Zones []string
	// KeyName and KeyAlgorithm name the TSIG key (algorithm hmac-sha256 when empty);
	// Secret is its base64 secret.
	KeyName, KeyAlgorithm string
	Secret                string
	// Timeout bounds one exchange with the server (default 10 s).
	Timeout time.Duration
}

var (
	_ libdns.RecordAppender = (*Provider)(nil)
	_ libdns.RecordDeleter  = (*Provider)(nil)
	_ libdns.RecordGetter   = (*Provider)(nil)
	_ libdns.ZoneLister     = (*Provider)(nil)
	_ slog.LogValuer        = (*Provider)(nil)
	_ fmt.Stringer          = (*Provider)(nil)
)

// Validate checks the settings (the secret decodes, the algorithm is known, zones are
// names); it names the secret's field, never its value.
func (p *Provider) Validate() error {
	var errs []error
	if p.Server == "" {
		errs = append(errs, errors.New("rfc2136: no server"))
	} else if _, _, err := net.SplitHostPort(p.serverAddr()); err != nil {
		errs = append(errs, fmt.Errorf("rfc2136: server %q: %v", p.Server, err))
	}
	if len(p.Zones) == 0 {
		errs = append(errs, errors.New("rfc2136: no zone"))
	}
	for _, z := range p.Zones {
		if _, ok := dns.IsDomainName(z); !ok || strings.Trim(z, ".") == "" {
			errs = append(errs, fmt.Errorf("rfc2136: zone %q is not a domain name", z))
		}
	}
	if p.KeyName == "" {
		errs = append(errs, errors.New("rfc2136: no TSIG key name"))
	} else if _, ok := dns.IsDomainName(p.KeyName); !ok {
		errs = append(errs, fmt.Errorf("rfc2136: TSIG key name %q is not a domain name", p.KeyName))
	}
	if _, err := p.algorithm(); err != nil {
		errs = append(errs, err)
	}
	if p.Secret == "" {
		errs = append(errs, errors.New("rfc2136: no TSIG secret"))
	} else if b, err := base64.StdEncoding.DecodeString(p.Secret); err != nil || len(b) == 0 {
		errs = append(errs, errors.New("rfc2136: the TSIG secret is not base64"))
	}
	return errors.Join(errs...)
}

func (p *Provider) algorithm() (string, error) {
	a := strings.ToLower(strings.TrimSuffix(p.KeyAlgorithm, "."))
	if a == "" {
		return dns.HmacSHA256, nil
	}
	if v, ok := algorithms[a]; ok {
		return v, nil
	}
	return "", fmt.Errorf("rfc2136: TSIG algorithm %q: one of hmac-sha256, hmac-sha384, hmac-sha512, hmac-sha224, hmac-sha1", p.KeyAlgorithm)
}

func (p *Provider) serverAddr() string {
	if _, _, err := net.SplitHostPort(p.Server); err == nil {
		return p.Server
	}
	return net.JoinHostPort(strings.Trim(p.Server, "[]"), "53")
}

// String names the server, zones and key, never the secret.
func (p *Provider) String() string {
	return fmt.Sprintf("rfc2136(server=%s zones=%s key=%s secret=[redacted])", p.Server, strings.Join(p.Zones, ","), p.KeyName)
}

// GoString is String (so %#v does not print the secret either).
func (p *Provider) GoString() string { return p.String() }

// LogValue keeps the secret out of slog output.
func (p *Provider) LogValue() slog.Value { return slog.StringValue(p.String()) }

// zone returns the allowed zone equal to zone (canonical FQDN), or ErrZone.
func (p *Provider) zone(zone string) (string, error) {
	z := dns.CanonicalName(zone)
	for _, allowed := range p.Zones {
		if dns.CanonicalName(allowed) == z {
			return z, nil
		}
	}
	return "", fmt.Errorf("rfc2136: %q: %w (allowed: %s)", zone, ErrZone, strings.Join(p.Zones, ", "))
}

// absName is rec's FQDN in zone, refused when outside it.
func absName(name, zone string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("rfc2136: empty record name: %w", ErrName)
	}
	fqdn := dns.CanonicalName(libdns.AbsoluteName(name, zone))
	if _, ok := dns.IsDomainName(fqdn); !ok || !dns.IsSubDomain(zone, fqdn) {
		return "", fmt.Errorf("rfc2136: %q in zone %s: %w", name, zone, ErrName)
	}
	return fqdn, nil
}

// toRR turns a libdns record into a miekg/dns RR for zone. ttl is the record's (0: 60 s).
func toRR(rec libdns.Record, zone string) (dns.RR, error) {
	r := rec.RR()
	fqdn, err := absName(r.Name, zone)
	if err != nil {
		return nil, err
	}
	ttl := uint32(r.TTL / time.Second)
	if r.TTL == 0 {
		ttl = 60
	}
	hdr := dns.RR_Header{Name: fqdn, Class: dns.ClassINET, Ttl: ttl}
	switch strings.ToUpper(r.Type) {
	case "TXT":
		hdr.Rrtype = dns.TypeTXT
		return &dns.TXT{Hdr: hdr, Txt: splitTXT(r.Data)}, nil
	case "":
		return nil, fmt.Errorf("rfc2136: %s: no record type: %w", fqdn, ErrType)
	default:
		t, ok := dns.StringToType[strings.ToUpper(r.Type)]
		if !ok || t == dns.TypeSOA || t == dns.TypeANY {
			return nil, fmt.Errorf("rfc2136: %s type %q: %w", fqdn, r.Type, ErrType)
		}
		rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", fqdn, ttl, strings.ToUpper(r.Type), r.Data))
		if err != nil || rr == nil {
			return nil, fmt.Errorf("rfc2136: %s %s %q: %v", fqdn, r.Type, r.Data, err)
		}
		// A data field must not smuggle another owner name in (it cannot: NewRR reads
		// one RR), but check the owner stayed in the zone all the same.
		if !dns.IsSubDomain(zone, dns.CanonicalName(rr.Header().Name)) {
			return nil, fmt.Errorf("rfc2136: %q: %w", rr.Header().Name, ErrName)
		}
		return rr, nil
	}
}

// splitTXT splits a TXT value into the 255-byte strings of the wire format.
func splitTXT(s string) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for len(s) > 255 {
		out = append(out, s[:255])
		s = s[255:]
	}
	return append(out, s)
}

// fromRR is the libdns form of rr, named relative to zone.
func fromRR(rr dns.RR, zone string) libdns.Record {
	h := rr.Header()
	name := libdns.RelativeName(dns.CanonicalName(h.Name), zone)
	ttl := time.Duration(h.Ttl) * time.Second
	if txt, ok := rr.(*dns.TXT); ok {
		return libdns.TXT{Name: name, TTL: ttl, Text: strings.Join(txt.Txt, "")}
	}
	data := strings.TrimPrefix(rr.String(), h.String())
	r := libdns.RR{Name: name, TTL: ttl, Type: dns.TypeToString[h.Rrtype], Data: data}
	if parsed, err := r.Parse(); err == nil {
		return parsed
	}
	return r
}

// AppendRecords adds recs to zone in one signed update (atomic on the server: all or
// none) and returns them as added.
func (p *Provider) AppendRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	z, err := p.zone(zone)
	if err != nil {
		return nil, err
	}
	rrs := make([]dns.RR, 0, len(recs))
	for _, rec := range recs {
		rr, err := toRR(rec, z)
		if err != nil {
			return nil, err
		}
		rrs = append(rrs, rr)
	}
	if len(rrs) == 0 {
		return nil, nil
	}
	m := new(dns.Msg)
	m.SetUpdate(z)
	m.Insert(rrs)
	if err := p.update(ctx, m); err != nil {
		return nil, fmt.Errorf("rfc2136: adding %d record(s) to %s: %w", len(rrs), z, err)
	}
	out := make([]libdns.Record, 0, len(rrs))
	for _, rr := range rrs {
		out = append(out, fromRR(rr, z))
	}
	return out, nil
}

// DeleteRecords removes recs from zone in one signed update: a record with data is
// removed exactly (RFC 2136 §2.5.4, whatever its TTL: RFC 2136 ignores the TTL of a
// deletion); one with a type but no data removes that RRset (§2.5.2); one with neither
// removes every RRset at the name (§2.5.3). The zone's SOA and NS are never removed.
// It returns the records it asked to remove (the update is idempotent: removing what
// is absent succeeds).
func (p *Provider) DeleteRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	z, err := p.zone(zone)
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetUpdate(z)
	var out []libdns.Record
	for _, rec := range recs {
		r := rec.RR()
		fqdn, err := absName(r.Name, z)
		if err != nil {
			return nil, err
		}
		switch {
		case r.Type == "":
			if fqdn == z {
				return nil, fmt.Errorf("rfc2136: removing every record at the zone apex %s: %w", z, ErrName)
			}
			m.RemoveName([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: fqdn, Rrtype: dns.TypeANY, Class: dns.ClassANY}}})
		case r.Data == "":
			t, ok := dns.StringToType[strings.ToUpper(r.Type)]
			if !ok || t == dns.TypeSOA || (t == dns.TypeNS && fqdn == z) {
				return nil, fmt.Errorf("rfc2136: removing %s %s: %w", fqdn, r.Type, ErrType)
			}
			m.RemoveRRset([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: fqdn, Rrtype: t, Class: dns.ClassANY}}})
		default:
			rr, err := toRR(rec, z)
			if err != nil {
				return nil, err
			}
			m.Remove([]dns.RR{rr})
		}
		out = append(out, rec)
	}
	if len(m.Ns) == 0 {
		return nil, nil
	}
	if err := p.update(ctx, m); err != nil {
		return nil, fmt.Errorf("rfc2136: removing %d record(s) from %s: %w", len(m.Ns), z, err)
	}
	return out, nil
}

// GetRecords reads zone by a TSIG-signed zone transfer (AXFR; the server must allow
// it for the key), without its SOA and DNSSEC records.
func (p *Provider) GetRecords(ctx context.Context, zone string) ([]libdns.Record, error) {
	z, err := p.zone(zone)
	if err != nil {
		return nil, err
	}
	alg, err := p.algorithm()
	if err != nil {
		return nil, err
	}
	key := dns.Fqdn(strings.ToLower(p.KeyName))
	tr := &dns.Transfer{TsigSecret: map[string]string{key: p.Secret}}
	if d := p.timeout(); d > 0 {
		tr.DialTimeout, tr.ReadTimeout, tr.WriteTimeout = d, d, d
	}
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d < tr.ReadTimeout || tr.ReadTimeout == 0 {
			tr.ReadTimeout = d
		}
	}
	m := new(dns.Msg)
	m.SetAxfr(z)
	m.SetTsig(key, alg, 300, time.Now().Unix())
	ch, err := tr.In(m, p.serverAddr())
	if err != nil {
		return nil, fmt.Errorf("rfc2136: transferring %s: %w", z, err)
	}
	var out []libdns.Record
	for env := range ch {
		if env.Error != nil {
			return nil, fmt.Errorf("rfc2136: transferring %s: %w", z, env.Error)
		}
		for _, rr := range env.RR {
			switch rr.Header().Rrtype {
			case dns.TypeSOA, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNSEC3, dns.TypeDNSKEY, dns.TypeNSEC3PARAM:
				continue
			}
			out = append(out, fromRR(rr, z))
		}
	}
	return out, nil
}

// ListZones lists the zones this provider may edit.
func (p *Provider) ListZones(context.Context) ([]libdns.Zone, error) {
	out := make([]libdns.Zone, 0, len(p.Zones))
	for _, z := range p.Zones {
		out = append(out, libdns.Zone{Name: dns.CanonicalName(z)})
	}
	slices.SortFunc(out, func(a, b libdns.Zone) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (p *Provider) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return 10 * time.Second
}

// update signs m and sends it over TCP, checking the answer's code and TSIG.
func (p *Provider) update(ctx context.Context, m *dns.Msg) error {
	alg, err := p.algorithm()
	if err != nil {
		return err
	}
	key := dns.Fqdn(strings.ToLower(p.KeyName))
	m.SetTsig(key, alg, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: p.timeout(), TsigSecret: map[string]string{key: p.Secret}}
	r, _, err := c.ExchangeContext(ctx, m, p.serverAddr())
	if err != nil && r != nil && r.Rcode != dns.RcodeSuccess {
		// An error answer is often unsigned (BIND does not sign NOTAUTH for a zone it
		// does not serve, nor an answer to a bad signature): miekg/dns then fails the
		// answer's TSIG check, but the code says what happened.
		err = nil
	}
	if err != nil {
		// miekg/dns reports a bad TSIG on the answer as dns.ErrSig etc.; none of its
		// errors carry the secret.
		return fmt.Errorf("exchange with %s: %w", p.serverAddr(), err)
	}
	if r.Rcode != dns.RcodeSuccess {
		detail := dns.RcodeToString[r.Rcode]
		if t := r.IsTsig(); t != nil && t.Error != 0 {
			detail += " (TSIG " + dns.RcodeToString[int(t.Error)] + ")"
		}
		return fmt.Errorf("%s answered %s: %w", p.serverAddr(), detail, ErrRefused)
	}
	return nil
}
