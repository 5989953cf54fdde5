package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTheNodesTokensPassTheCapOfAnAddressTheyShare (issue 39, item 4): on the node's
// machine 127.0.0.1 is the ingress beside the node, the operators' CLI and every
// tenant's release at once. A tenant process holding limits.maxConnsPerSource idle
// connections from it made every /v1/storage request of the local Caddy (certificate
// loads, stores, locks) and the operators' writes answer 503. Now a connection past the
// per-source cap serves a request with the ingress or admin token, body included; a
// tenant's token or none still gets the 503 (a health probe still passes, as before),
// and with the general part full the reserve's rule is unchanged: a write with the
// ingress token is refused there. Through the real listener cap and guard.
func TestTheNodesTokensPassTheCapOfAnAddressTheyShare(t *testing.T) {
	const ingressTok, adminTok = "ingress-token-0123456789abcdef0123", "admin-token-0123456789abcdef01234"
	s := testAPI(t, Config{IngressToken: ingressTok, AdminToken: adminTok, ConnMaxAge: time.Hour}, Deps{})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &signalingListener{Listener: tcp, changed: make(chan struct{}, 1)}
	const total, reserved, perSource = 6, 2, 1
	l := newConnLimiter(ln, total, reserved, perSource, nil)
	srv := &http.Server{
		Handler: s.conns.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, "served")
		})),
		ConnContext: connContext,
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	dialFrom := func(src string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	waitOpen := func(n int) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for l.open() != n {
			select {
			case <-ln.changed:
			case <-deadline:
				t.Fatalf("%d connections open, want %d", l.open(), n)
			}
		}
	}
	ask := func(src, method, path, tok, body string) (int, string) {
		t.Helper()
		c := dialFrom(src)
		req := method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		if tok != "" {
			req += "Authorization: Bearer " + tok + "\r\n"
		}
		req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s %s from %s: %v", method, path, src, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Close()
		return resp.StatusCode, string(b)
	}

	// A tenant process holds 127.0.0.1's one general connection (headers never ended).
	io.WriteString(dialFrom("127.0.0.1"), "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	waitOpen(1)
	for _, c := range []struct {
		method, path, tok, body string
		want                    int
	}{
		{"PUT", "/v1/storage/keys/certificates/x/a.example.org/a.example.org.crt", ingressTok, "pem", 200}, // the local Caddy stores a certificate
		{"GET", "/v1/storage/keys/certificates/x/a.example.org/a.example.org.crt", ingressTok, "", 200},
		{"PUT", "/v1/apps/shop", adminTok, `{"account":"acme"}`, 200}, // an operator's write
		{"PUT", "/v1/apps/shop", "tenant-token-0123456789abcdef0123", `{"account":"acme"}`, 503},
		{"GET", "/v1/storage/keys/x", "", "", 503},
		{"GET", "/v1/storage/keys/x", ingressTok + "x", "", 503},
		{"GET", "/v1/healthz", "", "", 200},
	} {
		code, body := ask("127.0.0.1", c.method, c.path, c.tok, c.body)
		if code != c.want {
			t.Errorf("%s %s (token %.8q…) past 127.0.0.1's cap: %d %s, want %d", c.method, c.path, c.tok, code, body, c.want)
		}
		if code == 503 && !strings.Contains(body, "maxConnsPerSource") {
			t.Errorf("%s %s: the 503 does not name limits.maxConnsPerSource: %s", c.method, c.path, body)
		}
		waitOpen(1)
	}

	// The general part full (127.0.0.1 to .4, one each): the reserve's rule alone.
	for i := 2; i <= 4; i++ {
		io.WriteString(dialFrom(fmt.Sprintf("127.0.0.%d", i)), "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	}
	waitOpen(4)
	if code, body := ask("127.0.0.9", "PUT", "/v1/storage/keys/x", ingressTok, "pem"); code != 503 || !strings.Contains(body, "kept for ingress polls") {
		t.Errorf("a write with the ingress token on a reserved connection (the general part full): %d %s, want the reserve's 503", code, body)
	}
}

// signalingListener signals changed after every step that moves what a connLimiter over
// it counts as open: a call of Accept (the limiter took a slot for it), a connection's
// first read (the limiter's Accept has returned it) and a close (the limiter released
// its slot first).
type signalingListener struct {
	net.Listener
	changed chan struct{}
}

func (l *signalingListener) signal() {
	select {
	case l.changed <- struct{}{}:
	default: // one pending signal is enough: the waiter reads the count again
	}
}

func (l *signalingListener) Accept() (net.Conn, error) {
	l.signal()
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &signalingConn{Conn: c, l: l}, nil
}

type signalingConn struct {
	net.Conn
	l    *signalingListener
	read sync.Once
}

func (c *signalingConn) Read(b []byte) (int, error) {
	c.read.Do(c.l.signal)
	return c.Conn.Read(b)
}

func (c *signalingConn) Close() error {
	err := c.Conn.Close()
	c.l.signal()
	return err
}
