package front

import (
	"crypto/tls"
	"net"
	"testing"
)

// clientHello captures the ClientHello message Go's TLS client sends for cfg.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		_ = tls.Client(c, cfg).Handshake()
		c.Close()
	}()
	var rec []byte
	buf := make([]byte, 1<<16)
	for {
		n, err := s.Read(buf)
		rec = append(rec, buf[:n]...)
		if err != nil {
			t.Fatalf("reading the ClientHello: %v", err)
		}
		// One record holds Go's whole ClientHello.
		if len(rec) < 5 {
			continue
		}
		if n := 5 + (int(rec[3])<<8 | int(rec[4])); len(rec) >= n {
			return rec[5:n]
		}
	}
}

func TestServerNameReadsWhatCryptoTLSParses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string
		ok   bool
	}{
		{"tls13", &tls.Config{ServerName: "db.example.org"}, "db.example.org", true},
		{"upper case as sent", &tls.Config{ServerName: "DB.Example.ORG"}, "DB.Example.ORG", true},
		{"tls12 only", &tls.Config{ServerName: "db.example.org", MaxVersion: tls.VersionTLS12}, "db.example.org", true},
		{"no sni", &tls.Config{InsecureSkipVerify: true}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := clientHello(t, tc.cfg)
			got, ok := ServerName(msg)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("ServerName = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestServerNameRefusesWhatIsNotOneWholeClientHello(t *testing.T) {
	msg := clientHello(t, &tls.Config{ServerName: "db.example.org"})
	for name, b := range map[string][]byte{
		"empty":       nil,
		"cut":         msg[:len(msg)-1],
		"trailing":    append(append([]byte(nil), msg...), 0),
		"server type": append([]byte{2}, msg[1:]...),
	} {
		if got, ok := ServerName(b); ok {
			t.Errorf("%s: ServerName = %q, true; want refused", name, got)
		}
	}
}
