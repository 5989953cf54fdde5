package scafo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

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

	cur     atomic.Pointer[Table]
	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) when cur changes

	cancel context.CancelFunc
	done   chan struct{}
}

// maxDocument bounds a document body (a 10 000-route fleet's document is a few MiB).
const maxDocument = 64 << 20

// NewPoller validates cfg and loads the state file; it does not poll yet (Start).
func NewPoller(cfg PollerConfig) (*Poller, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("scafo: no node endpoints")
	}
	for i, e := range cfg.Endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("scafo: endpoint %q: want http(s)://host[:port][/path]", e)
		}
		cfg.Endpoints[i] = strings.TrimSuffix(e, "/")
	}
	if cfg.Token == "" {
		return nil, errors.New("scafo: empty ingress token")
	}
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
	if cfg.Wait <= 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
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
	if cfg.StateFile != "" {
		t, err := loadStateFile(cfg.StateFile, groups)
		switch {
		case err != nil:
			p.log.Warn("ignoring the routing state file", zap.String("file", cfg.StateFile), zap.Error(err))
		case t != nil:
			p.cur.Store(t)
			p.log.Info("routing from the saved document until a node answers", zap.String("file", cfg.StateFile),
				zap.String("revision", t.Doc.Revision), zap.Uint64("serial", t.Serial))
			p.warnUnapplied(nil, t)
		}
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
	n := len(p.cfg.Endpoints)
	cur, failures := 0, 0
	for {
		start := time.Now()
		t := p.cur.Load()
		got, err := p.fetch(ctx, p.cfg.Endpoints[cur], t)
		if ctx.Err() != nil {
			return
		}
		pause := time.Duration(0)
		if err != nil {
			failures++
			what := "no document yet"
			if t != nil {
				what = "keeping the last good document (revision " + t.Doc.Revision + ")"
			}
			if failures <= n {
				p.log.Warn("routing document: "+what, zap.String("endpoint", p.cfg.Endpoints[cur]), zap.Error(err))
			} else {
				p.log.Debug("routing document: "+what, zap.String("endpoint", p.cfg.Endpoints[cur]), zap.Error(err))
			}
			cur = (cur + 1) % n
			if failures >= n {
				pause = p.cfg.Interval
			}
		} else {
			if failures >= n {
				p.log.Info("routing document: a node answers again", zap.String("endpoint", p.cfg.Endpoints[cur]))
			}
			failures = 0
			switch {
			case got == nil:
				// 304: unchanged.
			case t != nil && got.ETag == t.ETag && got.ETag != "":
			case t != nil && older(got, t):
				p.log.Warn("routing document: the node serves a document older than the one held; keeping it",
					zap.String("endpoint", p.cfg.Endpoints[cur]), zap.Uint64("serial", got.Serial), zap.Uint64("held", t.Serial))
				got = nil
			default:
				p.warnUnapplied(t, got)
				p.swap(got)
				p.log.Info("routing document applied", zap.String("endpoint", p.cfg.Endpoints[cur]),
					zap.String("revision", got.Doc.Revision), zap.Uint64("serial", got.Serial), zap.Int("routes", len(got.Doc.Routes)))
				if p.cfg.StateFile != "" {
					if err := saveStateFile(p.cfg.StateFile, got); err != nil {
						p.log.Warn("saving the routing document", zap.String("file", p.cfg.StateFile), zap.Error(err))
					}
				}
			}
			// A node that answers a long-poll at once without a new document (it is
			// behind, or does not hold long-polls) is asked again after Interval.
			if got == nil && time.Since(start) < min(p.cfg.Wait/2, time.Second) {
				pause = p.cfg.Interval
			}
			// A node that sends no ETag cannot be long-polled (there is nothing to send
			// in If-None-Match): it is asked again after Interval, not as fast as it
			// answers.
			if got != nil && got.ETag == "" {
				pause = p.cfg.Interval
			}
		}
		if pause > 0 {
			tm := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				tm.Stop()
				return
			case <-tm.C:
			}
		}
	}
}

// older reports whether got was derived from an earlier store serial than held (same
// epoch; without a serial on either side, or across epochs, the order is unknown and
// the newer answer wins).
func older(got, held *Table) bool {
	return got.HasSerial && held.HasSerial && got.Epoch == held.Epoch && got.Serial < held.Serial
}

// fetch asks one endpoint for the document; (nil, nil) is a 304.
func (p *Poller) fetch(ctx context.Context, endpoint string, held *Table) (*Table, error) {
	q := url.Values{"prefer": {"self"}}
	if p.cfg.Group != "" {
		q.Set("group", p.cfg.Group)
	}
	timeout := p.cfg.Timeout
	longPoll := held != nil && held.ETag != ""
	if longPoll {
		q.Set("wait", p.cfg.Wait.String())
		timeout += p.cfg.Wait
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, endpoint+api.IngressPath(api.FormatRoutes)+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Authorization", "Bearer "+p.cfg.Token)
	h.Set("Accept", "application/json")
	h.Set("User-Agent", "scafo-caddy")
	h.Set(api.HeaderIngress, p.cfg.Name)
	h.Set(api.HeaderIngressKind, api.KindPlugin)
	if held != nil && held.HasSerial {
		// What Caddy routes by is applied the moment it is swapped in.
		h.Set(api.HeaderAppliedSerial, strconv.FormatUint(held.Serial, 10))
		if isHex(held.Epoch, 16) {
			h.Set(api.HeaderAppliedEpoch, held.Epoch)
		}
		if isHex(held.Doc.Revision, 32) {
			h.Set(api.HeaderAppliedRevision, held.Doc.Revision)
		}
	}
	if longPoll {
		h.Set("If-None-Match", held.ETag)
	}
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer within %s", timeout)
		}
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		if !longPoll {
			return nil, errors.New("304 to a request without If-None-Match")
		}
		return nil, nil
	default:
		return nil, fmt.Errorf("%d: %s", resp.StatusCode, errorText(resp.Body))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("reading the document: %w", err)
	}
	if len(body) > maxDocument {
		return nil, fmt.Errorf("document over %d bytes", maxDocument)
	}
	doc, err := routing.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("document refused: %w", err)
	}
	t := NewGroupTable(doc, p.groups)
	t.ETag = resp.Header.Get("ETag")
	if v := resp.Header.Get(api.HeaderSerial); v != "" {
		if s, err := strconv.ParseUint(v, 10, 64); err == nil {
			t.HasSerial, t.Serial, t.Epoch = true, s, resp.Header.Get(api.HeaderEpoch)
		}
	}
	return t, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func errorText(r io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(r, 512))
	var e struct {
		Error  string `json:"error"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		if e.Detail != "" {
			return e.Error + ": " + e.Detail
		}
		return e.Error
	}
	return strconv.Quote(strings.TrimSpace(string(raw[:min(len(raw), 200)])))
}

// stateFile is the saved document: what the poller last applied.
type stateFile struct {
	V         int             `json:"v"`
	ETag      string          `json:"etag,omitempty"`
	HasSerial bool            `json:"hasSerial,omitempty"`
	Serial    uint64          `json:"serial,omitempty"`
	Epoch     string          `json:"epoch,omitempty"`
	Document  json.RawMessage `json:"document"`
}

func loadStateFile(path string, groups []string) (*Table, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil || st.V != 1 {
		return nil, fmt.Errorf("not a version 1 state file: %v", err)
	}
	doc, err := routing.Decode(st.Document)
	if err != nil {
		return nil, err
	}
	t := NewGroupTable(doc, groups)
	t.ETag, t.HasSerial, t.Serial, t.Epoch = st.ETag, st.HasSerial, st.Serial, st.Epoch
	return t, nil
}

// saveStateFile writes t atomically (temp file in the same directory, fsync, rename).
func saveStateFile(path string, t *Table) error {
	doc, err := routing.Marshal(t.Doc)
	if err != nil {
		return err
	}
	b, err := json.Marshal(stateFile{V: 1, ETag: t.ETag, HasSerial: t.HasSerial, Serial: t.Serial, Epoch: t.Epoch, Document: doc})
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
