package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// What a deploy by the pair does to a long-lived (upgraded) connection, through a real
// Traefik (docs/operating.md, "Deploys that lose nothing"): Traefik applies the move by
// swapping its router for new requests; a connection already upgraded (a WebSocket) is a
// request in flight on the old configuration, relayed byte for byte between the client and
// the old release until one of them closes it. The old release's graceful stop
// (http.Server.Shutdown) does not close it either; it ends when the old process exits,
// and the client's reconnect reaches the new release.

// upgradeRelease answers GETs like a release (its name in a JSON body) and takes
// "Upgrade: websocket" requests over: after the 101, each line the client sends comes back
// prefixed with the release's name.
type upgradeRelease struct {
	name  string
	srv   *http.Server
	mu    sync.Mutex
	conns []net.Conn // the upgraded connections (http.Server no longer tracks them)
}

func startUpgradeRelease(t *testing.T, name, addr string) *upgradeRelease {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("release %s: listening on %s: %v", name, addr, err)
	}
	r := &upgradeRelease{name: name}
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(echoReply{Name: r.name, Path: req.URL.Path, RawPath: req.RequestURI, Host: req.Host})
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		go func() {
			defer c.Close()
			for {
				line, err := brw.ReadString('\n')
				if err != nil {
					return
				}
				if _, err := fmt.Fprintf(c, "%s %s", r.name, line); err != nil {
					return
				}
			}
		}()
	})}
	go func() { _ = r.srv.Serve(ln) }()
	t.Cleanup(r.exit)
	return r
}

// exit is the old process exiting: the listener and every connection close, the upgraded
// ones included.
func (r *upgradeRelease) exit() {
	_ = r.srv.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
}

// upgraded is a client's upgraded connection through Traefik.
type upgraded struct {
	c  net.Conn
	br *bufio.Reader
}

func dialUpgraded(t *testing.T, tr *traefik, host string) *upgraded {
	t.Helper()
	c, err := net.DialTimeout("tcp", tr.webAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", host)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("upgrading through %s: %v", tr.name, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrading through %s: %d %s, want 101", tr.name, resp.StatusCode, b)
	}
	return &upgraded{c: c, br: br}
}

// say sends a line and returns the answer line ("" and the error if none came).
func (u *upgraded) say(line string) (string, error) {
	_ = u.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(u.c, "%s\n", line); err != nil {
		return "", err
	}
	got, err := u.br.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

func (u *upgraded) mustSay(t *testing.T, line, want string) {
	t.Helper()
	got, err := u.say(line)
	if err != nil || got != want {
		t.Fatalf("on the upgraded connection, %q: answered %q (%v), want %q", line, got, err, want)
	}
}

func TestUpgradedConnectionsAcrossAPairDeploy(t *testing.T) {
	f := startFleet(t, 1, nodeOptions{})
	n1 := f.nodes[0]
	tr := startTraefik(t, "traefik-upgrade", traefikOptions{node: n1})
	const host = "ws.apps.localhost"
	n1.putApp(t, appSpec{Name: "ws", Account: "acme", Placement: []string{n1.name}})
	port, pair := n1.instancePair(t, "ws")
	next := pair[0]
	if port == pair[0] {
		next = pair[1]
	}
	old := startUpgradeRelease(t, "ws@r0", hostPort(n1.ip, port))
	n1.setInstance(t, "ws", port, true)
	tr.waitServedBy(t, host, "/", "ws@r0", routeTimeout)

	ws := dialUpgraded(t, tr, host)
	ws.mustSay(t, "one", "ws@r0 one")

	// The deploy: the new release on the other port, the move applied, the drain.
	startUpgradeRelease(t, "ws@r1", hostPort(n1.ip, next))
	n1.moveAndWait(t, "ws", next)
	tr.waitServedBy(t, host, "/", "ws@r1", routeTimeout)  // new requests reach the new release
	ws.mustSay(t, "two", "ws@r0 two")                     // the upgraded one stays on the old
	if err := old.srv.Shutdown(t.Context()); err != nil { // the graceful stop
		t.Fatalf("shutting the old release down: %v", err)
	}
	ws.mustSay(t, "three", "ws@r0 three") // Shutdown leaves upgraded connections alone

	old.exit() // the old process exits: Traefik closes the client's side too
	if got, err := ws.say("four"); err == nil {
		t.Fatalf("after the old release exited, the upgraded connection answered %q, want it closed", got)
	}
	dialUpgraded(t, tr, host).mustSay(t, "again", "ws@r1 again") // the reconnect reaches the new release
}
