package scafo

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/scafo/ingress/internal/follow"
	"github.com/scafo/ingress/internal/peerowner"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// PollerConfig configures a Poller.
type PollerConfig struct {
	// Endpoints are node API base URLs ("http://10.83.0.1:7400"), the node beside this
	// Caddy first: the document is asked for with prefer=self, so its upstreams lead.
	Endpoints []string
	// Token is the fleet's ingress token.
	Token string
	// StateFile keeps the last good document across restarts ("" for none).
	StateFile string
	// Name is this ingress's name in the nodes' ingress reports.
	Name string
	// Group asks for one ingress group's routes (?group=); "" for every route.
	Group string
	// Wait is the long-poll wait (default 30s); Interval the pause after a failed round
	// of every endpoint, or between polls of a node that does not hold them (default
	// 2s); Timeout bounds a request beyond its wait (default 10s).
	Wait, Interval, Timeout time.Duration
	Logger                  *zap.Logger
	HTTPClient              *http.Client
}

// Poller keeps the fleet's routing document: it long-polls /v1/ingress/routes
// (prefer=self, ETag and If-None-Match with ?wait, like the Traefik provider plugin),
// sticks to the last endpoint that answered, moves to the next one on an error or a 503
// (draining), and keeps the last good document on every failure, in memory and in the
// state file. It never replaces a document with one derived from an older store serial.
type Poller struct {
	cfg    PollerConfig
	groups []string // cfg.Group parsed (nil: every route)
	log    *zap.Logger

	fol     *follow.Follower
	cur     atomic.Pointer[Table]
	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) when cur changes

	cancel context.CancelFunc
	done   chan struct{}
}

// NewPoller validates cfg and loads the state file; it does not poll yet (Start). The
// endpoints, the token and the timings are internal/follow's to check and default.
func NewPoller(cfg PollerConfig) (*Poller, error) {
	if cfg.Name == "" {
		cfg.Name = defaultName()
	}
	var groups []string
	if cfg.Group != "" {
		g, err := routing.ParseGroups(cfg.Group)
		if err != nil {
			return nil, fmt.Errorf("scafo: group: %w", err)
		}
		groups = g
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 2
		// A node on loopback (the default endpoint) is sent the ingress token only when
		// the node, or systemd holding its socket, listens there: never a process that
		// took its port (internal/peerowner; docs/security.md, "The node's port").
		tr.DialContext = peerowner.DialContext(peerowner.Trusted("scafo", os.Getuid()))
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	p := &Poller{cfg: cfg, groups: groups, log: cfg.Logger, changed: make(chan struct{})}
	// The loop is internal/follow's, shared with the layer-4 front: long-poll with
	// ETag, the next endpoint on an error or a 503, never an older serial, the state
	// file, the report of what was applied (kind plugin: Caddy routes by a table the
	// moment it is swapped in).
	fol, err := follow.New(follow.Config{
		Endpoints: cfg.Endpoints, Token: cfg.Token, Name: cfg.Name, Kind: api.KindPlugin, UserAgent: "scafo-caddy",
		Group: cfg.Group, StateFile: cfg.StateFile, Wait: cfg.Wait, Interval: cfg.Interval, Timeout: cfg.Timeout,
		Logger: slog.New(zapslog.NewHandler(cfg.Logger.Core())), HTTPClient: cfg.HTTPClient, Apply: p.apply,
	})
	if err != nil {
		return nil, fmt.Errorf("scafo: %w", err)
	}
	p.fol = fol
	if h := fol.Current(); h != nil {
		t := NewGroupTable(h.Doc, groups)
		t.ETag, t.HasSerial, t.Serial, t.Epoch = h.ETag, h.HasSerial, h.Serial, h.Epoch
		p.cur.Store(t)
	}
	return p, nil
}

// defaultName is "caddy-<hostname>", cut to a valid ingress name.
func defaultName() string {
	h, _ := os.Hostname()
	var b strings.Builder
	b.WriteString("caddy")
	for i := 0; i < len(h) && b.Len() < 63; i++ {
		c := h[i] | 0x20
		if 'a' <= c && c <= 'z' || '0' <= h[i] && h[i] <= '9' {
			if b.Len() == 5 {
				b.WriteByte('-')
			}
			if '0' <= h[i] && h[i] <= '9' {
				c = h[i]
			}
			b.WriteByte(c)
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// Table is the current document's table; nil before any document.
func (p *Poller) Table() *Table { return p.cur.Load() }

// Changed returns a channel closed the next time the table changes.
func (p *Poller) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// warnUnapplied logs, when next's applications with Traefik middlewares differ from
// prev's, which ones this Caddy answers 503 for (Table.Unapplied): a WARN while there
// are any, an INFO when the last one is gone.
func (p *Poller) warnUnapplied(prev, next *Table) {
	was, now := prev.Unapplied(), next.Unapplied()
	switch {
	case slices.Equal(was, now):
	case len(now) == 0:
		p.log.Info("routing document: no application lists Traefik middlewares any more")
	default:
		p.log.Warn("routing document: these applications list Traefik middlewares, which Caddy does not apply; their hosts, and the prefixes that select them, answer 503 here (serve them through Traefik ingresses: docs/traefik.md, Middlewares)",
			zap.Strings("applications", now))
	}
}

func (p *Poller) swap(t *Table) {
	p.mu.Lock()
	p.cur.Store(t)
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Start polls in a goroutine until Stop.
func (p *Poller) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go p.run(ctx)
}

// Stop ends polling and waits for the goroutine (a long-poll in flight is cancelled).
func (p *Poller) Stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cfg.HTTPClient.CloseIdleConnections()
}

// Destruct stops the poller when the last configuration using it is unloaded
// (caddy.Destructor, for the usage pool).
func (p *Poller) Destruct() error {
	p.Stop()
	return nil
}

func (p *Poller) run(ctx context.Context) {
	defer close(p.done)
	p.fol.Run(ctx)
}

// apply compiles a document the follower is about to hold: the table is swapped in
// before the next poll reports the document applied.
func (p *Poller) apply(h *follow.Held) {
	t := NewGroupTable(h.Doc, p.groups)
	t.ETag, t.HasSerial, t.Serial, t.Epoch = h.ETag, h.HasSerial, h.Serial, h.Epoch
	p.warnUnapplied(p.cur.Load(), t)
	p.swap(t)
}
