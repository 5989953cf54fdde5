package front

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/render/routing"
)

// Config is the front's configuration (`scafo-node front`: a file, SCAFO_FRONT_*
// variables and flags, as the node's). docs/passthrough.md, "The layer-4 front".
type Config struct {
	ConfigFile string   `description:"Configuration file (YAML or TOML)." json:"configFile,omitempty"`
	Nodes      []string `description:"Node API base URLs the front follows the routing document from, the local node first (it is asked with prefer=self); the next one when one fails." json:"nodes,omitempty"`
	Token      string   `description:"The fleet's ingress token. Unset, the front reads SCAFO_INGRESS_TOKEN, the variable Traefik's unit reads from /etc/scafo/ingress.env." json:"token,omitempty" loggable:"false"`
	Name       string   `description:"This front's name in the nodes' ingress reports (1..63 bytes of [a-z0-9.-]); default front-<host name>." json:"name,omitempty"`
	Group      string   `description:"The ingress groups whose routes the front serves (?group=, comma-separated); empty for every group." json:"group,omitempty"`
	StateFile  string   `description:"File that keeps the last routing document applied, so a restart with every node down still routes; empty for none." json:"stateFile,omitempty"`
	Listen     Listen   `description:"The addresses the front listens on, when systemd hands over no socket (scafo-front.socket does)." json:"listen"`
	Fallback   Fallback `description:"Where what no passthrough route takes goes." json:"fallback"`
	TCP        TCP      `description:"The TCP side (443/tcp): TLS by server name." json:"tcp"`
	UDP        UDP      `description:"The UDP side (443/udp): QUIC by server name." json:"udp"`
	// ShutdownGrace is how long open TCP connections may go on after a stop.
	ShutdownGrace ptypes.Duration `description:"How long open connections go on after SIGTERM before they are closed (new ones wait in the held socket's queue for the next run)." json:"shutdownGrace,omitempty"`
}

// Listen are the front's own addresses (used when no socket is handed over).
type Listen struct {
	TCP string `description:"TCP address (TLS)." json:"tcp,omitempty"`
	UDP string `description:"UDP address (QUIC); empty: no QUIC." json:"udp,omitempty"`
}

// Fallback are the HTTP ingress's internal addresses.
type Fallback struct {
	TLS  string `description:"Traefik's TLS entry point on an internal address, with proxyProtocol.trustedIPs naming the front: every TLS connection no passthrough route takes (no SNI, an unknown or odd name, an HTTP host) goes there behind a PROXY v2 header." json:"tls,omitempty"`
	QUIC string `description:"Traefik's HTTP/3 (UDP) address for QUIC connections no passthrough route takes; empty (default) drops them and clients fall back to TCP. The client's address is lost there." json:"quic,omitempty"`
}

// TCP times and bounds the TCP side.
type TCP struct {
	HelloTimeout ptypes.Duration `description:"Time a client has to send its whole ClientHello; a slower one is cut off." json:"helloTimeout,omitempty"`
	MaxHello     int             `description:"Bytes of TLS records a ClientHello may take; a larger one is cut off." json:"maxHello,omitempty"`
	DialTimeout  ptypes.Duration `description:"How long a silent upstream is waited for before the next one in document order (a refusal moves on at once)." json:"dialTimeout,omitempty"`
}

// UDP bounds the QUIC side.
type UDP struct {
	MaxFlows          int             `description:"Most QUIC flows (client connections) held at once." json:"maxFlows,omitempty"`
	NewFlowsPerSecond float64         `description:"New flows a second per source network (an IPv4 /24, an IPv6 /64)." json:"newFlowsPerSecond,omitempty"`
	DialTimeout       ptypes.Duration `description:"How long an upstream may stay silent before a new flow's first datagrams are replayed to the next one." json:"dialTimeout,omitempty"`
	UnansweredTimeout ptypes.Duration `description:"When a flow its upstream never established expires." json:"unansweredTimeout,omitempty"`
	IdleTimeout       ptypes.Duration `description:"When an established flow that carried nothing expires." json:"idleTimeout,omitempty"`
}

// Defaults are the front's defaults.
func Defaults() Config {
	return Config{
		Nodes:         []string{"http://127.0.0.1:7400"},
		Listen:        Listen{TCP: ":443", UDP: ":443"},
		Fallback:      Fallback{TLS: "127.0.0.1:8443"},
		TCP:           TCP{HelloTimeout: ptypes.Duration(defaultHelloTimeout), MaxHello: defaultMaxHello, DialTimeout: ptypes.Duration(defaultDialTimeout)},
		UDP:           UDP{MaxFlows: 4096, NewFlowsPerSecond: 20, DialTimeout: ptypes.Duration(time.Second), UnansweredTimeout: ptypes.Duration(10 * time.Second), IdleTimeout: ptypes.Duration(3 * time.Minute)},
		ShutdownGrace: ptypes.Duration(10 * time.Second),
	}
}

// Validate lists what is wrong with c, each error naming its setting.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Nodes) == 0 {
		bad("nodes: at least one node API URL")
	}
	for i, n := range c.Nodes {
		u, err := url.Parse(n)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			bad("nodes[%d] %q: want http(s)://host[:port]", i, n)
		}
	}
	if c.Token == "" {
		bad("token: empty (set it, or SCAFO_INGRESS_TOKEN)")
	}
	if c.Name != "" {
		if ingress.ValidName(c.Name) != nil {
			bad("name %q: 1..63 bytes of [a-z0-9.-], starting and ending with a letter or digit", c.Name)
		}
	}
	if c.Group != "" {
		if _, err := routing.ParseGroups(c.Group); err != nil {
			bad("group %q: %v", c.Group, err)
		}
	}
	if c.Listen.TCP == "" {
		bad("listen.tcp: empty (the front's TLS port)")
	}
	for name, a := range map[string]string{"listen.tcp": c.Listen.TCP, "listen.udp": c.Listen.UDP} {
		if a == "" {
			continue
		}
		if _, p, err := net.SplitHostPort(a); err != nil || !validPort(p, true) {
			bad("%s %q: want [host]:port", name, a)
		}
	}
	for name, a := range map[string]string{"fallback.tls": c.Fallback.TLS, "fallback.quic": c.Fallback.QUIC} {
		if a == "" {
			continue
		}
		if h, p, err := net.SplitHostPort(a); err != nil || h == "" || !validPort(p, false) {
			bad("%s %q: want host:port", name, a)
		}
	}
	if c.Fallback.TLS != "" && c.Fallback.TLS == c.Listen.TCP {
		bad("fallback.tls %q: the front's own listen.tcp (it would relay to itself)", c.Fallback.TLS)
	}
	if d := time.Duration(c.TCP.HelloTimeout); d < 100*time.Millisecond || d > time.Minute {
		bad("tcp.helloTimeout %s: 100ms..1m", d)
	}
	if c.TCP.MaxHello < minMaxHello || c.TCP.MaxHello > maxMaxHello {
		bad("tcp.maxHello %d: %d..%d", c.TCP.MaxHello, minMaxHello, maxMaxHello)
	}
	if d := time.Duration(c.TCP.DialTimeout); d < 10*time.Millisecond || d > 30*time.Second {
		bad("tcp.dialTimeout %s: 10ms..30s", d)
	}
	// A flow may hold a socket of its own (one per client address and instance), and
	// scafo-front.service allows 262 144 descriptors: at most a quarter of them.
	if c.UDP.MaxFlows < 1 || c.UDP.MaxFlows > 65536 {
		bad("udp.maxFlows %d: 1..65536", c.UDP.MaxFlows)
	}
	if c.UDP.NewFlowsPerSecond <= 0 {
		bad("udp.newFlowsPerSecond %v: must be positive", c.UDP.NewFlowsPerSecond)
	}
	if d := time.Duration(c.UDP.DialTimeout); d < 10*time.Millisecond || d > 30*time.Second {
		bad("udp.dialTimeout %s: 10ms..30s", d)
	}
	if d := time.Duration(c.UDP.UnansweredTimeout); d < time.Second || d > 5*time.Minute {
		bad("udp.unansweredTimeout %s: 1s..5m", d)
	}
	if d := time.Duration(c.UDP.IdleTimeout); d < time.Second || d > time.Hour {
		bad("udp.idleTimeout %s: 1s..1h", d)
	}
	if d := time.Duration(c.ShutdownGrace); d < 0 || d > 10*time.Minute {
		bad("shutdownGrace %s: 0..10m", d)
	}
	return errors.Join(errs...)
}

func validPort(p string, zeroOK bool) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n <= 65535 && (n > 0 || zeroOK && n == 0) && strconv.Itoa(n) == p
}

// DefaultName is "front-<host name>", cut to a valid ingress name.
func DefaultName(hostname string) string {
	var b strings.Builder
	b.WriteString("front")
	for i := 0; i < len(hostname) && b.Len() < 63; i++ {
		c := hostname[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			if b.Len() == 5 {
				b.WriteByte('-')
			}
			b.WriteByte(c)
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
