package rfc2136

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libdns/libdns"
	"github.com/miekg/dns"

	"github.com/scafo/ingress/node/rfc2136/bindtest"
)

func provider(b *bindtest.Server, zones ...string) *Provider {
	return &Provider{Server: b.Addr, Zones: zones, KeyName: b.Key.Name, Secret: b.Key.Secret, Timeout: 5 * time.Second}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestAppendedTXTRecordsAreServedByBINDAndDeletedExactly: two TXT records on one name
// (what DNS-01 for example.com and *.example.com does at once) are appended by signed
// updates; BIND serves both (read back by plain queries and by AXFR); deleting one by
// its value leaves the other; deleting the RRset by type leaves none. A value longer
// than one TXT string (255 bytes) round-trips whole.
func TestAppendedTXTRecordsAreServedByBINDAndDeletedExactly(t *testing.T) {
	b := bindtest.Start(t, bindtest.Config{Zones: []string{"fleet.test"}})
	p := provider(b, "fleet.test")
	long := strings.Repeat("x", 300)
	added, err := p.AppendRecords(ctx(t), "fleet.test.", []libdns.Record{
		libdns.TXT{Name: "_acme-challenge.apps", Text: "token-one", TTL: 30 * time.Second},
		libdns.TXT{Name: "_acme-challenge.apps", Text: "token-two"},
		libdns.TXT{Name: "long", Text: long},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 3 {
		t.Fatalf("added %v", added)
	}
	if txt, ok := added[0].(libdns.TXT); !ok || txt.Name != "_acme-challenge.apps" || txt.Text != "token-one" || txt.TTL != 30*time.Second {
		t.Fatalf("returned record %#v", added[0])
	}
	if got := b.TXT(t, "_acme-challenge.apps.fleet.test"); !slices.Equal(got, []string{"token-one", "token-two"}) {
		t.Fatalf("BIND serves %q", got)
	}
	if got := b.TXT(t, "long.fleet.test"); len(got) != 1 || got[0] != long {
		t.Fatalf("long TXT read back as %q", got)
	}
	// The provider reads the zone back by AXFR too.
	recs, err := p.GetRecords(ctx(t), "fleet.test")
	if err != nil {
		t.Fatal(err)
	}
	var txts []string
	for _, r := range recs {
		if r.RR().Type == "TXT" {
			txts = append(txts, r.RR().Name+"="+r.RR().Data)
		}
	}
	slices.Sort(txts)
	if want := []string{"_acme-challenge.apps=token-one", "_acme-challenge.apps=token-two", "long=" + long}; !slices.Equal(txts, want) {
		t.Fatalf("GetRecords TXT: %q", txts)
	}

	if _, err := p.DeleteRecords(ctx(t), "fleet.test", []libdns.Record{libdns.TXT{Name: "_acme-challenge.apps", Text: "token-one"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.TXT(t, "_acme-challenge.apps.fleet.test"); !slices.Equal(got, []string{"token-two"}) {
		t.Fatalf("after deleting token-one BIND serves %q", got)
	}
	if _, err := p.DeleteRecords(ctx(t), "fleet.test", []libdns.Record{libdns.RR{Name: "_acme-challenge.apps", Type: "TXT"}, libdns.RR{Name: "long", Type: "TXT"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.ZoneTXT(t, "fleet.test"); len(got) != 0 {
		t.Fatalf("TXT left in the zone: %q", got)
	}
	// Deleting what is absent is not an error (libdns: silently ignored).
	if _, err := p.DeleteRecords(ctx(t), "fleet.test", []libdns.Record{libdns.TXT{Name: "nothing", Text: "x"}}); err != nil {
		t.Fatalf("deleting an absent record: %v", err)
	}
}

// TestHostileUpdatesAreRefused: a wrong secret, a key BIND knows but does not let
// update, a zone the provider is not given, a zone BIND does not serve, names outside
// the zone; each is an error and BIND's zone is unchanged. No error carries the
// secret.
func TestHostileUpdatesAreRefused(t *testing.T) {
	b := bindtest.Start(t, bindtest.Config{Zones: []string{"fleet.test", "other.test"}})
	good := provider(b, "fleet.test")
	wrongSecret := provider(b, "fleet.test")
	wrongSecret.Secret = bindtest.NewKey("x").Secret
	otherKey := &Provider{Server: b.Addr, Zones: []string{"fleet.test"}, KeyName: b.Other.Name, Secret: b.Other.Secret}
	notServed := provider(b, "nowhere.test")
	rec := []libdns.Record{libdns.TXT{Name: "_acme-challenge", Text: "v"}}
	cases := []struct {
		name string
		p    *Provider
		zone string
		recs []libdns.Record
		want error  // errors.Is (every case has one)
		sub  string // substring of the error
	}{
		{"bad TSIG secret", wrongSecret, "fleet.test", rec, ErrRefused, "NOTAUTH (TSIG BADSIG)"},
		{"key without update rights", otherKey, "fleet.test", rec, ErrRefused, "REFUSED"},
		{"zone not given to the provider", good, "other.test", rec, ErrZone, "other.test"},
		{"zone the server does not serve", notServed, "nowhere.test", rec, ErrRefused, "NOTAUTH"},
		{"absolute name in another zone", good, "fleet.test", []libdns.Record{libdns.TXT{Name: "_acme-challenge.other.test.", Text: "v"}}, ErrName, "other.test"},
		{"relative name climbing out", good, "fleet.test", []libdns.Record{libdns.TXT{Name: "x.fleet.test.evil.", Text: "v"}}, ErrName, "evil"},
		{"empty name", good, "fleet.test", []libdns.Record{libdns.TXT{Name: "", Text: "v"}}, ErrName, "empty"},
		{"SOA", good, "fleet.test", []libdns.Record{libdns.RR{Name: "@", Type: "SOA", Data: "ns. h. 2 1 1 1 1"}}, ErrType, "SOA"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.p.AppendRecords(ctx(t), c.zone, c.recs)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.sub) {
				t.Fatalf("error %v, want %v mentioning %q", err, c.want, c.sub)
			}
			for _, s := range []string{b.Key.Secret, b.Other.Secret, wrongSecret.Secret} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error carries a secret: %v", err)
				}
			}
		})
	}
	// Removing the whole zone apex is refused too.
	if _, err := good.DeleteRecords(ctx(t), "fleet.test", []libdns.Record{libdns.RR{Name: "@"}}); !errors.Is(err, ErrName) {
		t.Fatalf("deleting every record at the apex: %v", err)
	}
	for _, z := range []string{"fleet.test", "other.test"} {
		if got := b.ZoneTXT(t, z); len(got) != 0 {
			t.Fatalf("a refused update changed %s: %q", z, got)
		}
	}
	if !strings.Contains(b.Log(), "tsig verify failure (BADSIG)") {
		t.Fatal("BIND did not log the bad signature: the update did not reach it signed")
	}
}

// TestProviderNeverPrintsItsSecret: %v, %+v, %#v, String and slog all redact it;
// Validate names problems without the value.
func TestProviderNeverPrintsItsSecret(t *testing.T) {
	secret := bindtest.NewKey("k").Secret
	p := &Provider{Server: "127.0.0.1:53", Zones: []string{"fleet.test"}, KeyName: "k", Secret: secret}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("provider", "p", p)
	outs := []string{fmt.Sprintf("%v", p), fmt.Sprintf("%+v", p), fmt.Sprintf("%#v", p), fmt.Sprint(p), p.String(), logged.String()}
	for _, o := range outs {
		if strings.Contains(o, secret) || !strings.Contains(o, "redacted") {
			t.Fatalf("printed form %q", o)
		}
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("valid provider: %v", err)
	}
	bad := *p
	bad.Secret = "not base64!" + secret
	bad.KeyAlgorithm = "md5"
	err := bad.Validate()
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "not base64") || !strings.Contains(err.Error(), "md5") {
		t.Fatalf("Validate: %v", err)
	}
}

// TestTheDocumentedNarrowUpdatePolicyLetsTheKeyWriteOnlyChallengeTXT: with the
// update-policy docs/certificates-dns01.md recommends, the key may write the platform
// challenge TXT and TXT under the delegation zone, and BIND refuses anything else (an
// A record, a TXT elsewhere) even signed with the right key: a second fence behind the
// node's own checks.
func TestTheDocumentedNarrowUpdatePolicyLetsTheKeyWriteOnlyChallengeTXT(t *testing.T) {
	b := bindtest.Start(t, bindtest.Config{Zones: []string{"example.test"}, UpdatePolicy: "grant <key> name _acme-challenge.apps.example.test. TXT; grant <key> subdomain acme.example.test. TXT;"})
	p := provider(b, "example.test")
	for _, rec := range []libdns.Record{
		libdns.TXT{Name: "_acme-challenge.apps", Text: "platform"},
		libdns.TXT{Name: "k7x.acme", Text: "delegated"},
	} {
		if _, err := p.AppendRecords(ctx(t), "example.test", []libdns.Record{rec}); err != nil {
			t.Fatalf("%v: %v", rec, err)
		}
	}
	for _, rec := range []libdns.Record{
		libdns.Address{Name: "www", IP: netip.MustParseAddr("127.0.0.9")},
		libdns.TXT{Name: "www", Text: "not a challenge"},
		libdns.TXT{Name: "_acme-challenge.other", Text: "not ours"},
		libdns.RR{Name: "k7x.acme", Type: "CNAME", Data: "elsewhere.test."},
	} {
		if _, err := p.AppendRecords(ctx(t), "example.test", []libdns.Record{rec}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "REFUSED") {
			t.Fatalf("%v: %v, want REFUSED", rec, err)
		}
	}
	if got := b.ZoneTXT(t, "example.test"); !slices.Equal(got, []string{"_acme-challenge.apps.example.test. platform", "k7x.acme.example.test. delegated"}) {
		t.Fatalf("zone TXT %q", got)
	}
	if rrs := b.Query(t, "www.example.test", dns.TypeA); len(rrs) != 0 {
		t.Fatalf("www written: %v", rrs)
	}
}
