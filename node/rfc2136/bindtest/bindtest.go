// Package bindtest gives tests a real authoritative DNS server: BIND 9 (`named`, Debian's
// bind9, `.ci/bind.sh install`) on a free loopback port, serving primary zones that
// accept RFC 2136 updates signed with a TSIG key generated per test, and nothing else
// (no recursion). Tests read the zones back with plain queries and a TSIG-signed AXFR,
// independently of the code under test.
//
// Without named the test is skipped with instructions, except under CI (env CI set),
// where it fails.
//
//	b := bindtest.Start(t, bindtest.Config{Zones: []string{"fleet.test"}})
//	// b.Addr is host:port; b.Key the update key; b.TXT(t, "_acme-challenge.fleet.test")
package bindtest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/scafo/ingress/internal/proc"
)

// Config is one BIND.
type Config struct {
	// Zones are served as primaries, each with an SOA, one NS (ns.<zone>, 127.0.0.1),
	// updatable by Key (any name, any type) and transferable with it.
	Zones []string
	// Records are extra zone-file lines (absolute names), e.g.
	// "_acme-challenge.shop.customer.test. 60 IN CNAME x.acme.fleet.test.".
	Records []string
	// Resolver makes named also answer as a resolver would (recursion on for
	// loopback), so a CNAME into another of its zones is followed in one answer, as a
	// CA's resolver follows a delegation CNAME. It serves the root zone itself (empty,
	// no hints): it never sends a query off this machine.
	Resolver bool
	// UpdatePolicy replaces every zone's update-policy rules (default: Key may update
	// any name: "grant <key> zonesub ANY;"); <key> is replaced by Key's name.
	UpdatePolicy string
}

// Key is a TSIG key as BIND and miekg/dns name it.
type Key struct {
	Name      string // FQDN, e.g. "scafo-acme."
	Algorithm string // dns.HmacSHA256
	Secret    string // base64
}

// Server is a running named.
type Server struct {
	Addr string // 127.0.0.1:<port>, UDP and TCP
	// Key may update and transfer every zone; Other is a valid key BIND knows that may do
	// neither (a signed update with it is refused).
	Key, Other Key
	Zones      []string
	proc       *proc.Proc
}

// Binary finds named: $PATH, then /usr/sbin.
func Binary() (string, error) {
	if p, err := exec.LookPath("named"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/named"); err == nil {
		return "/usr/sbin/named", nil
	}
	return "", fmt.Errorf("named (BIND 9) is not installed")
}

// NewKey makes a TSIG key with a random 32-byte secret.
func NewKey(name string) Key {
	b := make([]byte, 32)
	rand.Read(b)
	return Key{Name: dns.Fqdn(name), Algorithm: dns.HmacSHA256, Secret: base64.StdEncoding.EncodeToString(b)}
}

// Start runs named for the calling test; it is killed when the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		msg := fmt.Sprintf("no BIND for tests: %v. Run `.ci/bind.sh install` (apt-get install bind9)", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := &Server{Key: NewKey("scafo-acme"), Other: NewKey("someone-else")}
	for _, z := range cfg.Zones {
		s.Zones = append(s.Zones, dns.Fqdn(strings.ToLower(z)))
	}
	dir := t.TempDir()
	var lastErr error
	for range 5 {
		port, err := freeUDPTCPPort()
		if err != nil {
			t.Fatal(err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
		conf := s.writeConfig(t, dir, port, cfg)
		s.proc = proc.New(t, "named", bin, "-g", "-c", conf, "-n", "1")
		s.proc.Grace = 5 * time.Second
		s.proc.MustStart(t)
		// named -g logs "all zones loaded" (then "running"); every zone must then
		// answer its SOA.
		if lastErr = s.proc.WaitLog(60*time.Second, 0, "all zones loaded"); lastErr == nil {
			if lastErr = s.proc.WaitUntil(30*time.Second, s.ready); lastErr == nil {
				return s
			}
		}
		s.proc.Stop(time.Second)
		if !strings.Contains(s.proc.Output(), "address in use") {
			break
		}
	}
	t.Fatalf("named did not start: %v\n%s", lastErr, s.proc.Tail(40))
	return nil
}

// ready checks that every zone answers its SOA.
func (s *Server) ready() error {
	for _, z := range s.Zones {
		m := new(dns.Msg)
		m.SetQuestion(z, dns.TypeSOA)
		r, err := dns.Exchange(m, s.Addr)
		if err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return fmt.Errorf("%s SOA: %s", z, dns.RcodeToString[r.Rcode])
		}
	}
	return nil
}

func (s *Server) writeConfig(t testing.TB, dir string, port int, cfg Config) string {
	t.Helper()
	records, resolver := cfg.Records, cfg.Resolver
	recursion := "recursion no;"
	if resolver {
		recursion = "recursion yes; allow-recursion { 127.0.0.1; }; forwarders { }; forward only; qname-minimization off;"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `options {
	directory %q;
	pid-file %q;
	session-keyfile %q;
	managed-keys-directory %q;
	listen-on port %d { 127.0.0.1; };
	listen-on-v6 { none; };
	%s
	allow-query { any; };
	allow-transfer { none; };
	dnssec-validation no;
	notify no;
	minimal-responses yes;
};
controls { };
logging { category default { default_stderr; }; category update { default_stderr; }; category update-security { default_stderr; }; };
`, dir, filepath.Join(dir, "named.pid"), filepath.Join(dir, "session.key"), dir, port, recursion)
	if resolver {
		// The root zone, served here: recursion never looks beyond this server.
		root := filepath.Join(dir, "root.zone")
		if err := os.WriteFile(root, []byte("$TTL 60\n. IN SOA ns.root. hostmaster.root. 1 60 60 600 1\n. IN NS ns.root.\nns.root. IN A 127.0.0.1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "zone \".\" { type primary; file %q; };\n", root)
	}
	for _, k := range []Key{s.Key, s.Other} {
		fmt.Fprintf(&b, "key %q { algorithm %s; secret %q; };\n", strings.TrimSuffix(k.Name, "."), strings.TrimSuffix(k.Algorithm, "."), k.Secret)
	}
	key := strings.TrimSuffix(s.Key.Name, ".")
	policy := "grant " + key + " zonesub ANY;"
	if cfg.UpdatePolicy != "" {
		policy = strings.ReplaceAll(cfg.UpdatePolicy, "<key>", key)
	}
	for _, z := range s.Zones {
		file := filepath.Join(dir, strings.TrimSuffix(z, ".")+".zone")
		var zb strings.Builder
		fmt.Fprintf(&zb, "$TTL 60\n%s IN SOA ns.%s hostmaster.%s 1 60 60 600 1\n%s IN NS ns.%s\nns.%s IN A 127.0.0.1\n", z, z, z, z, z, z)
		for _, r := range records {
			name, _, _ := strings.Cut(strings.TrimSpace(r), " ")
			if dns.IsSubDomain(z, dns.Fqdn(strings.ToLower(name))) {
				zb.WriteString(r + "\n")
			}
		}
		if err := os.WriteFile(file, []byte(zb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "zone %q { type primary; file %q; update-policy { %s }; allow-transfer { key %s; }; };\n",
			strings.TrimSuffix(z, "."), file, policy, key)
	}
	conf := filepath.Join(dir, "named.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// freeUDPTCPPort is a loopback port free for both TCP and UDP at the time of asking.
func freeUDPTCPPort() (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		if port >= 24000 && port <= 25999 {
			continue // the e2e suite's range
		}
		return port, nil
	}
	return 0, fmt.Errorf("no loopback port free for TCP and UDP")
}

// Query asks named for name's records of type qtype (authoritative answer section).
func (s *Server) Query(t testing.TB, name string, qtype uint16) []dns.RR {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, s.Addr)
	if err != nil {
		t.Fatalf("query %s %s: %v", name, dns.TypeToString[qtype], err)
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		t.Fatalf("query %s %s: %s", name, dns.TypeToString[qtype], dns.RcodeToString[r.Rcode])
	}
	return r.Answer
}

// TXT is the TXT strings at name (each record's strings joined), sorted.
func (s *Server) TXT(t testing.TB, name string) []string {
	t.Helper()
	var out []string
	for _, rr := range s.Query(t, name, dns.TypeTXT) {
		if txt, ok := rr.(*dns.TXT); ok && strings.EqualFold(txt.Hdr.Name, dns.Fqdn(name)) {
			out = append(out, strings.Join(txt.Txt, ""))
		}
	}
	slices.Sort(out)
	return out
}

// ZoneTXT is every TXT record in zone, read back by a TSIG-signed AXFR, as
// "name text" lines, sorted.
func (s *Server) ZoneTXT(t testing.TB, zone string) []string {
	t.Helper()
	tr := &dns.Transfer{TsigSecret: map[string]string{s.Key.Name: s.Key.Secret}}
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	m.SetTsig(s.Key.Name, s.Key.Algorithm, 300, time.Now().Unix())
	ch, err := tr.In(m, s.Addr)
	if err != nil {
		t.Fatalf("AXFR %s: %v", zone, err)
	}
	var out []string
	for env := range ch {
		if env.Error != nil {
			t.Fatalf("AXFR %s: %v", zone, env.Error)
		}
		for _, rr := range env.RR {
			if txt, ok := rr.(*dns.TXT); ok {
				out = append(out, strings.ToLower(txt.Hdr.Name)+" "+strings.Join(txt.Txt, ""))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Update sends one TSIG-signed update with key (the test acting as an operator or a
// customer editing their DNS): rrs inserted, then the RRsets of remove removed.
func (s *Server) Update(t testing.TB, zone string, insert []string, removeRRsets []string) {
	t.Helper()
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	for _, line := range removeRRsets {
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatal(err)
		}
		m.RemoveRRset([]dns.RR{rr})
	}
	for _, line := range insert {
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatal(err)
		}
		m.Insert([]dns.RR{rr})
	}
	m.SetTsig(s.Key.Name, s.Key.Algorithm, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second, TsigSecret: map[string]string{s.Key.Name: s.Key.Secret}}
	r, _, err := c.Exchange(m, s.Addr)
	if err != nil {
		t.Fatalf("update %s: %v", zone, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		t.Fatalf("update %s: %s", zone, dns.RcodeToString[r.Rcode])
	}
}

// Log is named's output so far.
func (s *Server) Log() string { return s.proc.Output() }
