// Package follow keeps a fleet's routing document as an ingress does: it long-polls
// /v1/ingress/routes on one node (prefer=self, ETag and If-None-Match with ?wait),
// moves to the next node on an error or a 503, keeps the last good document on every
// failure, in memory and in a state file (so a restart with every node down still
// routes), never goes back to a document derived from an older store serial, and
// reports what it applied on every poll (docs/design.md §11).
//
// The layer-4 front (node/front) follows with it; the Caddy module's poller
// (deploy/caddy/scafo) is the same loop written against zap, from which this one was
// taken.
package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/routing"
)

// Config configures a Follower.
type Config struct {
	// Endpoints are node API base URLs ("http://10.83.0.1:7400"), the node beside
	// this ingress first: the document is asked for with prefer=self.
	Endpoints []string
	// Token is the fleet's ingress token.
	Token string
	// Name is this ingress's name in the nodes' reports; Kind its kind (api.Kind*),
	// one that reports what it applied.
	Name, Kind string
	// UserAgent names the program in its requests.
	UserAgent string
	// Group asks for one ingress group's routes (?group=); "" for every route.
	Group string
	// StateFile keeps the last good document across restarts ("" for none).
	StateFile string
	// Wait is the long-poll wait (default 30s); Interval the pause after a failed
	// round of every endpoint, or between polls of a node that does not hold them
	// (default 2s); Timeout bounds a request beyond its wait (default 10s).
	Wait, Interval, Timeout time.Duration
	Logger                  *slog.Logger
	// Apply, when set, is called with every document before it is held (and so before
	// any poll reports it applied): an ingress that routes by a structure of its own
	// builds it here, so that nothing is reported applied before it routes by it.
	Apply func(*Held)
	// HTTPClient sends the polls (required: the caller decides whom a token may go to,
	// e.g. internal/peerowner's dialer).
	HTTPClient *http.Client
}

// Held is one document as applied, with what the node said of it.
type Held struct {
	Doc *routing.Document
	// HasSerial: the node sent X-Scafo-Serial; Serial and Epoch are then the store
	// serial the document was derived from.
	HasSerial bool
	Serial    uint64
	Epoch     string
	// ETag is the node's ETag of the body ("" when loaded from a state file without).
	ETag string
}

// Follower keeps the document. Current is safe from any goroutine.
type Follower struct {
	cfg    Config
	groups []string
	log    *slog.Logger

	cur     atomic.Pointer[Held]
	mu      sync.Mutex
	changed chan struct{}
}

// MaxDocument bounds a document body (a 10 000-route fleet's document is a few MiB).
const MaxDocument = 64 << 20

// New validates cfg and loads the state file; it does not poll yet (Run).
func New(cfg Config) (*Follower, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("no node endpoints")
	}
	cfg.Endpoints = append([]string(nil), cfg.Endpoints...)
	for i, e := range cfg.Endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("endpoint %q: want http(s)://host[:port][/path]", e)
		}
		cfg.Endpoints[i] = strings.TrimSuffix(e, "/")
	}
	if cfg.Token == "" {
		return nil, errors.New("empty ingress token")
	}
	if cfg.HTTPClient == nil {
		return nil, errors.New("no HTTP client")
	}
	var groups []string
	if cfg.Group != "" {
		g, err := routing.ParseGroups(cfg.Group)
		if err != nil {
			return nil, fmt.Errorf("group: %w", err)
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
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Follower{cfg: cfg, groups: groups, log: cfg.Logger, changed: make(chan struct{})}
	if cfg.StateFile != "" {
		h, err := loadStateFile(cfg.StateFile)
		switch {
		case err != nil:
			f.log.Warn("ignoring the routing state file", "file", cfg.StateFile, "err", err)
		case h != nil:
			f.cur.Store(h)
			f.log.Info("routing from the saved document until a node answers", "file", cfg.StateFile,
				"revision", h.Doc.Revision, "serial", h.Serial)
		}
	}
	return f, nil
}

// Current is the document held; nil before any.
func (f *Follower) Current() *Held { return f.cur.Load() }

// Changed returns a channel closed the next time the document changes.
func (f *Follower) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *Follower) swap(h *Held) {
	f.mu.Lock()
	f.cur.Store(h)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Run polls until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	n := len(f.cfg.Endpoints)
	cur, failures := 0, 0
	for {
		start := time.Now()
		held := f.cur.Load()
		got, err := f.fetch(ctx, f.cfg.Endpoints[cur], held)
		if ctx.Err() != nil {
			return
		}
		pause := time.Duration(0)
		if err != nil {
			failures++
			what := "no document yet"
			if held != nil {
				what = "keeping the last good document (revision " + held.Doc.Revision + ")"
			}
			lvl := slog.LevelWarn
			if failures > n {
				lvl = slog.LevelDebug
			}
			f.log.Log(ctx, lvl, "routing document: "+what, "endpoint", f.cfg.Endpoints[cur], "err", err)
			cur = (cur + 1) % n
			if failures >= n {
				pause = f.cfg.Interval
			}
		} else {
			if failures >= n {
				f.log.Info("routing document: a node answers again", "endpoint", f.cfg.Endpoints[cur])
			}
			failures = 0
			switch {
			case got == nil: // 304: unchanged
			case held != nil && got.ETag == held.ETag && got.ETag != "":
			case held != nil && older(got, held):
				f.log.Warn("routing document: the node serves a document older than the one held; keeping it",
					"endpoint", f.cfg.Endpoints[cur], "serial", got.Serial, "held", held.Serial)
				got = nil
			default:
				if f.cfg.Apply != nil {
					f.cfg.Apply(got)
				}
				f.swap(got)
				f.log.Info("routing document applied", "endpoint", f.cfg.Endpoints[cur],
					"revision", got.Doc.Revision, "serial", got.Serial, "routes", len(got.Doc.Routes))
				if f.cfg.StateFile != "" {
					if err := saveStateFile(f.cfg.StateFile, got); err != nil {
						f.log.Warn("saving the routing document", "file", f.cfg.StateFile, "err", err)
					}
				}
			}
			// A node that answers a long-poll at once without a new document (it is
			// behind, or does not hold long-polls) is asked again after Interval; so is
			// one that sends no ETag (there is nothing to send in If-None-Match).
			if got == nil && time.Since(start) < min(f.cfg.Wait/2, time.Second) {
				pause = f.cfg.Interval
			}
			if got != nil && got.ETag == "" {
				pause = f.cfg.Interval
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

// older: got was derived from an earlier store serial than held (same epoch; without
// a serial on either side, or across epochs, the order is unknown and the newer
// answer wins).
func older(got, held *Held) bool {
	return got.HasSerial && held.HasSerial && got.Epoch == held.Epoch && got.Serial < held.Serial
}

// fetch asks one endpoint for the document; (nil, nil) is a 304.
func (f *Follower) fetch(ctx context.Context, endpoint string, held *Held) (*Held, error) {
	q := url.Values{"prefer": {"self"}}
	if f.cfg.Group != "" {
		q.Set("group", f.cfg.Group)
	}
	timeout := f.cfg.Timeout
	longPoll := held != nil && held.ETag != ""
	if longPoll {
		q.Set("wait", f.cfg.Wait.String())
		timeout += f.cfg.Wait
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, endpoint+api.IngressPath(api.FormatRoutes)+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Authorization", "Bearer "+f.cfg.Token)
	h.Set("Accept", "application/json")
	if f.cfg.UserAgent != "" {
		h.Set("User-Agent", f.cfg.UserAgent)
	}
	if f.cfg.Name != "" {
		h.Set(api.HeaderIngress, f.cfg.Name)
		h.Set(api.HeaderIngressKind, f.cfg.Kind)
		if held != nil && held.HasSerial {
			// What the ingress routes by is applied the moment it is swapped in.
			h.Set(api.HeaderAppliedSerial, strconv.FormatUint(held.Serial, 10))
			if isHex(held.Epoch, 16) {
				h.Set(api.HeaderAppliedEpoch, held.Epoch)
			}
			if isHex(held.Doc.Revision, 32) {
				h.Set(api.HeaderAppliedRevision, held.Doc.Revision)
			}
		}
	}
	if longPoll {
		h.Set("If-None-Match", held.ETag)
	}
	resp, err := f.cfg.HTTPClient.Do(req)
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
	if rep := resp.Header.Get(api.HeaderIngressReport); strings.HasPrefix(rep, "refused") {
		f.log.Warn("the node refused this ingress's report", "endpoint", endpoint, "answer", rep)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("reading the document: %w", err)
	}
	if len(body) > MaxDocument {
		return nil, fmt.Errorf("document over %d bytes", MaxDocument)
	}
	doc, err := routing.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("document refused: %w", err)
	}
	got := &Held{Doc: doc, ETag: resp.Header.Get("ETag")}
	if v := resp.Header.Get(api.HeaderSerial); v != "" {
		if s, err := strconv.ParseUint(v, 10, 64); err == nil {
			got.HasSerial, got.Serial, got.Epoch = true, s, resp.Header.Get(api.HeaderEpoch)
		}
	}
	return got, nil
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

// stateFile is the saved document: what the follower last applied.
type stateFile struct {
	V         int             `json:"v"`
	ETag      string          `json:"etag,omitempty"`
	HasSerial bool            `json:"hasSerial,omitempty"`
	Serial    uint64          `json:"serial,omitempty"`
	Epoch     string          `json:"epoch,omitempty"`
	Document  json.RawMessage `json:"document"`
}

func loadStateFile(path string) (*Held, error) {
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
	return &Held{Doc: doc, ETag: st.ETag, HasSerial: st.HasSerial, Serial: st.Serial, Epoch: st.Epoch}, nil
}

// saveStateFile writes h atomically (temp file in the same directory, fsync, rename).
func saveStateFile(path string, h *Held) error {
	doc, err := routing.Marshal(h.Doc)
	if err != nil {
		return err
	}
	b, err := json.Marshal(stateFile{V: 1, ETag: h.ETag, HasSerial: h.HasSerial, Serial: h.Serial, Epoch: h.Epoch, Document: doc})
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
