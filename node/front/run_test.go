package front

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/fakenode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// TestAFrontReportsADocumentOnlyOnceItRoutesByIt: the front follows the node's
// document; a passthrough name goes to the fallback before its route exists, and from
// the first poll that reports the document applied it reaches the route's upstream
// (the table is built before the document is held), so ?wait=applied can never
// answer before the front routes by a write. It asks for the group it serves (?group=).
func TestAFrontReportsADocumentOnlyOnceItRoutesByIt(t *testing.T) {
	pki, up, fb := tlsApp(t)
	doc := func(routes ...routing.Route) *routing.Document {
		d := &routing.Document{V: routing.Version, Routes: routes}
		d.Seal()
		return d
	}
	n := fakenode.New(t, "")
	n.SetDoc(t, 1, doc())

	cfg := frontConfig(n.URL())
	cfg.Group, cfg.Fallback.TLS = "eu", fb.addr()
	socks := serveFront(t, cfg, &http.Client{})
	waitApplied(t, n, "1")
	if r := n.Requests()[0]; r.Group != "eu" {
		t.Fatalf("the front of group eu asked for group %q", r.Group)
	}
	addr := socks.TCP.Addr().String()
	// Before its route: to the fallback (which never answers; the client gives up).
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if err := tls.Client(raw, &tls.Config{ServerName: nameDB, RootCAs: pki.roots}).Handshake(); err == nil {
		t.Fatal("a name without a route made a session")
	}
	raw.Close()
	if got := fb.next(t); got.err != nil || len(got.bytes) == 0 {
		t.Fatalf("the fallback's connection: %v (%d bytes)", got.err, len(got.bytes))
	}
	if acc, _ := up.seen(); acc != 0 {
		t.Fatalf("the upstream accepted %d connections before its route existed", acc)
	}

	n.SetDoc(t, 2, doc(routing.Route{Host: nameDB, Application: "db", Passthrough: true,
		Upstreams: []routing.Upstream{{Node: "n1", Address: up.addr()}}}))
	waitApplied(t, n, "2")
	rep, c, err := dialTLS(addr, nameDB, pki.roots, nil)
	if err != nil {
		t.Fatalf("reported serial 2 applied, and %s does not reach its upstream: %v", nameDB, err)
	}
	c.Close()
	if rep.serverName != nameDB {
		t.Fatalf("reply %+v", rep)
	}
}

// waitApplied waits for a poll of the front reporting serial applied.
func waitApplied(t *testing.T, n *fakenode.Node, serial string) {
	t.Helper()
	n.WaitFor(t, "a poll reporting serial "+serial, 10*time.Second, func(n *fakenode.Node) bool {
		return len(n.Reqs) > 0 && n.Reqs[len(n.Reqs)-1].AppliedSerial == serial && n.Reqs[len(n.Reqs)-1].Kind == api.KindFront
	})
}

// TestAFrontConfigurationIsRefusedNamingTheSetting: each bad value is refused with its
// setting's name, and the defaults with a token pass.
func TestAFrontConfigurationIsRefusedNamingTheSetting(t *testing.T) {
	ok := Defaults()
	ok.Token = "t"
	if err := ok.Validate(); err != nil {
		t.Fatalf("the defaults with a token: %v", err)
	}
	for _, tc := range []struct {
		setting string
		edit    func(*Config)
	}{
		{"token", func(c *Config) { c.Token = "" }},
		{"nodes", func(c *Config) { c.Nodes = nil }},
		{"nodes[0]", func(c *Config) { c.Nodes = []string{"ftp://x"} }},
		{"name", func(c *Config) { c.Name = "Front" }},
		{"group", func(c *Config) { c.Group = "a b" }},
		{"listen.tcp", func(c *Config) { c.Listen.TCP = "" }},
		{"listen.udp", func(c *Config) { c.Listen.UDP = "443" }},
		{"fallback.tls", func(c *Config) { c.Fallback.TLS = ":8443" }},
		{"fallback.tls", func(c *Config) { c.Fallback.TLS = "127.0.0.1:443"; c.Listen.TCP = "127.0.0.1:443" }},
		{"fallback.quic", func(c *Config) { c.Fallback.QUIC = "x" }},
		{"tcp.helloTimeout", func(c *Config) { c.TCP.HelloTimeout = 0 }},
		{"tcp.maxHello", func(c *Config) { c.TCP.MaxHello = 1 << 20 }},
		{"tcp.dialTimeout", func(c *Config) { c.TCP.DialTimeout = 0 }},
		{"udp.maxFlows", func(c *Config) { c.UDP.MaxFlows = 0 }},
		{"udp.newFlowsPerSecond", func(c *Config) { c.UDP.NewFlowsPerSecond = -1 }},
		{"udp.dialTimeout", func(c *Config) { c.UDP.DialTimeout = 0 }},
		{"udp.unansweredTimeout", func(c *Config) { c.UDP.UnansweredTimeout = 0 }},
		{"udp.idleTimeout", func(c *Config) { c.UDP.IdleTimeout = 0 }},
		{"shutdownGrace", func(c *Config) { c.ShutdownGrace = -1 }},
	} {
		c := Defaults()
		c.Token = "t"
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.setting+" ") && !strings.HasPrefix(err.Error(), tc.setting+":") {
			t.Errorf("%s: %v, want an error naming it", tc.setting, err)
		}
	}
}

// TestAHandedOverSocketOnAnotherPortIsRefused: the sockets systemd hands over must be
// on the ports listen.tcp and listen.udp name.
func TestAHandedOverSocketOnAnotherPortIsRefused(t *testing.T) {
	err := samePort("listen.tcp", ":443", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8443})
	if err == nil || !strings.Contains(err.Error(), "listen.tcp") || !strings.Contains(err.Error(), "8443") {
		t.Fatalf("%v", err)
	}
	if err := samePort("listen.tcp", ":443", &net.TCPAddr{Port: 443}); err != nil {
		t.Fatal(err)
	}
}

// frontConfig is the defaults with a token and a name, following node, on a loopback
// TCP port from :0.
func frontConfig(node string) Config {
	cfg := Defaults()
	cfg.Nodes, cfg.Token, cfg.Name = []string{node}, fakenode.Token, "front-t"
	cfg.Listen = Listen{TCP: "127.0.0.1:0"}
	cfg.ShutdownGrace = 0
	return cfg
}

// serveFront validates cfg, builds a front of it polling with client (nil: its own) and
// serves it on the sockets it returns until the test ends, when Serve must return
// without an error.
func serveFront(t *testing.T, cfg Config, client *http.Client) *Sockets {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f, err := New(cfg, client, nil)
	if err != nil {
		t.Fatal(err)
	}
	socks, err := OpenSockets(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.Serve(ctx, socks, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return socks
}
