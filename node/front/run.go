package front

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scafo/ingress/internal/follow"
	"github.com/scafo/ingress/internal/peerowner"
	"github.com/scafo/ingress/internal/systemd"
	"github.com/scafo/ingress/node/api"
)

// Sockets are the front's listening sockets: systemd's (scafo-front.socket) or its
// own. UDP is nil without QUIC.
type Sockets struct {
	TCP net.Listener
	UDP *net.UDPConn
	// Held: the service manager holds them across restarts (what arrives while the
	// front restarts waits in their queues for the next run).
	Held bool
}

// OpenSockets takes the sockets systemd handed over, or binds cfg.Listen. A handed-over
// socket must be on the port its setting names (a mismatch is an error naming both),
// and there must be one TCP socket and at most one UDP socket.
func OpenSockets(cfg *Config) (*Sockets, error) {
	held, err := systemd.InheritedSockets()
	if err != nil {
		return nil, err
	}
	if held != nil {
		if len(held.Stream) != 1 || len(held.Datagram) > 1 {
			return nil, fmt.Errorf("the service manager handed over %d TCP and %d UDP sockets: the front takes one ListenStream= and at most one ListenDatagram=", len(held.Stream), len(held.Datagram))
		}
		s := &Sockets{TCP: held.Stream[0], Held: true}
		if err := samePort("listen.tcp", cfg.Listen.TCP, s.TCP.Addr()); err != nil {
			return nil, err
		}
		if len(held.Datagram) == 1 {
			s.UDP = held.Datagram[0]
			if cfg.Listen.UDP == "" {
				return nil, fmt.Errorf("listen.udp is empty (no QUIC) but the service manager handed over a UDP socket on %s", s.UDP.LocalAddr())
			}
			if err := samePort("listen.udp", cfg.Listen.UDP, s.UDP.LocalAddr()); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	s := &Sockets{}
	if s.TCP, err = net.Listen("tcp", cfg.Listen.TCP); err != nil {
		return nil, fmt.Errorf("listen.tcp %q: %w", cfg.Listen.TCP, err)
	}
	if cfg.Listen.UDP != "" {
		ua, err := net.ResolveUDPAddr("udp", cfg.Listen.UDP)
		if err == nil {
			s.UDP, err = net.ListenUDP("udp", ua)
		}
		if err != nil {
			s.TCP.Close()
			return nil, fmt.Errorf("listen.udp %q: %w", cfg.Listen.UDP, err)
		}
	}
	return s, nil
}

func samePort(setting, want string, got net.Addr) error {
	_, wp, _ := net.SplitHostPort(want)
	_, gp, _ := net.SplitHostPort(got.String())
	if wp != gp {
		return fmt.Errorf("%s %q: the service manager handed over a socket on %s (the socket unit and the setting must name one port)", setting, want, got)
	}
	return nil
}

// Front is a running front: the follower, the table it keeps, the TCP proxy and the
// UDP relay.
type Front struct {
	cfg   Config
	log   *slog.Logger
	fol   *follow.Follower
	table atomic.Pointer[Table]
	tcp   *TCPProxy
	udp   *UDPRelay
}

// New builds a front from a validated configuration. client sends the polls (nil: one
// that sends the token to a node on this machine only when the node, or systemd
// holding its socket, listens there: internal/peerowner).
func New(cfg Config, client *http.Client, log *slog.Logger) (*Front, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 2
		tr.DialContext = peerowner.DialContext(peerowner.Trusted("scafo", os.Getuid()))
		client = &http.Client{Transport: tr}
	}
	if cfg.Name == "" {
		h, _ := os.Hostname()
		cfg.Name = DefaultName(h)
	}
	f := &Front{cfg: cfg, log: log}
	fol, err := follow.New(follow.Config{
		Endpoints: cfg.Nodes, Token: cfg.Token, Name: cfg.Name, Kind: api.KindFront, UserAgent: "scafo-front",
		Group: cfg.Group, StateFile: cfg.StateFile, Logger: log, HTTPClient: client, Apply: f.apply,
	})
	if err != nil {
		return nil, err
	}
	f.fol = fol
	if h := fol.Current(); h != nil {
		f.table.Store(FromDocument(h.Doc))
	}
	// No route may send a client to a node API the front follows, nor to the other
	// protocol's fallback (each proxy refuses its own fallback and sockets itself).
	apis := nodeAPIAddrs(cfg.Nodes)
	f.tcp = NewTCPProxy(TCPConfig{
		Fallback: cfg.Fallback.TLS, HelloTimeout: time.Duration(cfg.TCP.HelloTimeout), MaxHello: cfg.TCP.MaxHello,
		DialTimeout: time.Duration(cfg.TCP.DialTimeout), Refuse: nonEmpty(slices.Concat(apis, []string{cfg.Fallback.QUIC})),
	}, f.Table, log)
	f.udp = NewUDPRelay(UDPConfig{
		Fallback: cfg.Fallback.QUIC, MaxFlows: cfg.UDP.MaxFlows, NewFlowsPerSecond: cfg.UDP.NewFlowsPerSecond,
		DialTimeout: time.Duration(cfg.UDP.DialTimeout), UnansweredTimeout: time.Duration(cfg.UDP.UnansweredTimeout),
		IdleTimeout: time.Duration(cfg.UDP.IdleTimeout), Refuse: nonEmpty(slices.Concat(apis, []string{cfg.Fallback.TLS})),
	}, f.Table, log)
	return f, nil
}

// Table is the passthrough table the front routes by now (nil before any document:
// every connection goes to the fallback, where no router takes a passthrough name).
func (f *Front) Table() *Table { return f.table.Load() }

// Name is the front's name in the nodes' reports.
func (f *Front) Name() string { return f.cfg.Name }

// Serve routes on s until ctx ends, then stops: it stops accepting, lets open TCP
// connections go on for cfg.ShutdownGrace, and drops the QUIC flows. ready is called
// once the sockets are served.
func (f *Front) Serve(ctx context.Context, s *Sockets, ready func()) error {
	fctx, stopFollow := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.fol.Run(fctx) }()
	errc := make(chan error, 2)
	go func() { errc <- f.tcp.Serve(s.TCP) }()
	if s.UDP != nil {
		go func() { errc <- f.udp.Serve(s.UDP) }()
	}
	f.log.Info("front serving", "tcp", s.TCP.Addr().String(), "udp", udpAddr(s.UDP), "held", s.Held,
		"fallback", f.cfg.Fallback.TLS, "passthrough_names", f.Table().Len())
	if ready != nil {
		ready()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	grace, cancel := context.WithTimeout(context.Background(), time.Duration(f.cfg.ShutdownGrace))
	defer cancel()
	if serr := f.tcp.Shutdown(grace); serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		err = errors.Join(err, serr)
	}
	f.udp.Close()
	stopFollow()
	wg.Wait()
	return err
}

// apply builds the table of a document before the follower holds it (and reports it
// applied on its next poll).
func (f *Front) apply(h *follow.Held) {
	t := FromDocument(h.Doc)
	f.table.Store(t)
	f.log.Info("front routes", "revision", h.Doc.Revision, "serial", h.Serial, "passthrough_names", t.Len())
}

func nonEmpty(ss []string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
}

func udpAddr(u *net.UDPConn) string {
	if u == nil {
		return ""
	}
	return u.LocalAddr().String()
}
