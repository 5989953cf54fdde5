// Package storageclient is the Go client of a scafo node's /v1/storage: a
// certmagic.Storage (with certmagic.TryLocker and certmagic.LockLeaseRenewer) that keeps
// CertMagic's certificates, keys and locks in the fleet store through any node.
//
//	st, err := storageclient.New("http://10.83.0.1:7400", ingressToken, storageclient.Options{})
//	cfg := certmagic.NewDefault()
//	cfg.Storage = st
//
// Keys follow package certstore's rules (checked here too, so a bad key fails before a
// request). Locks are leases: the client renews a held lock in the background (every
// LockLease/3) until Unlock, and a client that dies loses its locks after LockLease.
// Errors wrap the sentinels of certstore (and fs.ErrNotExist for a missing key), so
// errors.Is works the same as on the in-process adapter.
package storageclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/internal/peerowner"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/certstore"
	"github.com/scafo/ingress/node/store"
)

// Options configure a Client. The zero value works.
type Options struct {
	// HTTPClient sends the requests. Default: a client with a 60s timeout.
	HTTPClient *http.Client
	// LockLease is each lock's lease (default 2m, the node's bounds are 1s to 1h);
	// RenewInterval how often a held lock is renewed (default LockLease/3).
	LockLease, RenewInterval time.Duration
	// PollMin and PollMax bound the backoff of a blocked Lock (defaults 100ms, 2s).
	PollMin, PollMax time.Duration
	// Logger receives lost locks and failed renewals. Default slog.Default().
	Logger *slog.Logger
	// Fallbacks are more nodes of the same fleet (same form as the endpoint), tried in
	// order when the current one cannot be reached or answers 503; the client sticks to
	// the last one that answered. Every operation is safe to repeat on another node (a
	// lock request carries its owner token, so a retried acquire renews its own lock).
	Fallbacks []string
}

// Client talks to one node's /v1/storage. Safe for concurrent use.
type Client struct {
	bases []string // scheme://host[:port][/path], no trailing slash
	cur   atomic.Int32
	token string
	hc    *http.Client
	locks *certstore.LockManager
}

var (
	_ certmagic.Storage          = (*Client)(nil)
	_ certmagic.Locker           = (*Client)(nil)
	_ certmagic.TryLocker        = (*Client)(nil)
	_ certmagic.LockLeaseRenewer = (*Client)(nil)
	_ certstore.LeaseOps         = (*Client)(nil)
)

// New returns a client of the node at endpoint ("http://10.83.0.1:7400") with the
// ingress token.
func New(endpoint, token string, opts Options) (*Client, error) {
	var bases []string
	for _, ep := range append([]string{endpoint}, opts.Fallbacks...) {
		u, err := url.Parse(ep)
		if err != nil {
			return nil, fmt.Errorf("storageclient: endpoint: %w", err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("storageclient: endpoint %q: want http(s)://host[:port][/path]", ep)
		}
		bases = append(bases, strings.TrimSuffix(u.String(), "/"))
	}
	if token == "" {
		return nil, errors.New("storageclient: empty token (the node's ingress token)")
	}
	if opts.HTTPClient == nil {
		// A node on loopback is sent the ingress token only when the node (or systemd
		// holding its socket) listens there, not a process that took its port
		// (internal/peerowner; docs/security.md, "The node's port").
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = peerowner.DialContext(peerowner.Trusted("scafo", os.Getuid()))
		opts.HTTPClient = &http.Client{Timeout: 60 * time.Second, Transport: tr}
	}
	if opts.LockLease <= 0 {
		opts.LockLease = certstore.DefaultLockLease
	}
	c := &Client{bases: bases, token: token, hc: opts.HTTPClient}
	c.locks = certstore.NewLockManager(c, certstore.LockOptions{Lease: opts.LockLease, RenewInterval: opts.RenewInterval,
		PollMin: opts.PollMin, PollMax: opts.PollMax, Logger: opts.Logger})
	return c, nil
}

// String names the storage in CertMagic's logs.
func (c *Client) String() string { return "scafo-storage:" + strings.Join(c.bases, ",") }

// Error is a node's error answer.
type Error struct {
	Status int
	// Code is the body's "error" ("not found", "lock held", …); Detail its "detail".
	Code, Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("storageclient: %d %s: %s", e.Status, e.Code, e.Detail)
}

// Is maps the answer onto the sentinels the in-process adapter returns.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Status == http.StatusNotFound && e.Code == "not found"
	case certstore.ErrInvalidKey:
		return e.Status == http.StatusBadRequest && (e.Code == "invalid key" || e.Code == "invalid lock name")
	case certstore.ErrInvalidLockRequest:
		return e.Status == http.StatusBadRequest && e.Code == "invalid lock request"
	case certstore.ErrValueTooLarge:
		return e.Status == http.StatusRequestEntityTooLarge
	case certstore.ErrLockLost:
		return e.Status == http.StatusConflict && e.Code == "lock lost"
	case certstore.ErrNotLockOwner:
		return e.Status == http.StatusConflict && e.Code == "not lock owner"
	case certstore.ErrCorrupt:
		return e.Code == "corrupt store object"
	case store.ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	}
	return false
}

// escapeKey percent-encodes each segment of key for a URL path.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func (c *Client) keyURL(key, query string) string {
	u := api.PathStorageKeys
	if key != "" {
		u += "/" + escapeKey(key)
	}
	if query != "" {
		u += "?" + query
	}
	return u
}

func (c *Client) lockURL(name string) string {
	// A lock name is one opaque string: every "/" is escaped too.
	return api.PathStorageLocks + "/" + url.PathEscape(name)
}

// maxAnswer bounds what the client reads of an answer (a value is at most 1 MiB by
// default on the node).
const maxAnswer = 64 << 20

// do sends method path to the current node, moving to the next one (Fallbacks) on a
// transport error or a 503.
func (c *Client) do(ctx context.Context, method, path string, body []byte, contentType string) (*http.Response, []byte, error) {
	start := int(c.cur.Load())
	var (
		resp *http.Response
		b    []byte
		err  error
	)
	for i := range c.bases {
		idx := (start + i) % len(c.bases)
		var retry bool
		resp, b, retry, err = c.doOne(ctx, c.bases[idx]+path, method, body, contentType)
		if !retry {
			c.cur.Store(int32(idx))
			return resp, b, err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return resp, b, err
}

func (c *Client) doOne(ctx context.Context, u, method string, reqBody []byte, contentType string) (*http.Response, []byte, bool, error) {
	var rd io.Reader
	if reqBody != nil {
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, nil, false, fmt.Errorf("storageclient: %s: %w", method, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, true, fmt.Errorf("storageclient: %s %s: %w: %w", method, u, store.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, nil, true, fmt.Errorf("storageclient: %s %s: reading answer: %w: %w", method, u, store.ErrUnavailable, err)
	}
	if len(b) > maxAnswer {
		return nil, nil, false, fmt.Errorf("storageclient: %s %s: answer over %d bytes", method, u, maxAnswer)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode}
		var eb struct {
			Error  string `json:"error"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
			e.Code, e.Detail = eb.Error, eb.Detail
		} else {
			e.Code, e.Detail = http.StatusText(resp.StatusCode), strings.TrimSpace(string(b[:min(len(b), 200)]))
		}
		return resp, b, resp.StatusCode == http.StatusServiceUnavailable, e
	}
	return resp, b, false, nil
}

// Store puts value at key.
func (c *Client) Store(ctx context.Context, key string, value []byte) error {
	if err := certstore.CheckKey(key); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	_, _, err := c.do(ctx, http.MethodPut, c.keyURL(key, ""), value, "application/octet-stream")
	return err
}

// Load returns the value at key; an error wrapping fs.ErrNotExist when there is none.
func (c *Client) Load(ctx context.Context, key string) ([]byte, error) {
	if err := certstore.CheckKey(key); err != nil {
		return nil, err
	}
	_, b, err := c.do(ctx, http.MethodGet, c.keyURL(key, ""), nil, "")
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Delete removes the value at key and everything below it; a missing key is not an
// error.
func (c *Client) Delete(ctx context.Context, key string) error {
	if err := certstore.CheckKey(key); err != nil {
		return err
	}
	_, _, err := c.do(ctx, http.MethodDelete, c.keyURL(key, ""), nil, "")
	return err
}

// Exists reports whether key is a value or a directory (false on any error).
func (c *Client) Exists(ctx context.Context, key string) bool {
	if certstore.CheckKey(key) != nil {
		return false
	}
	resp, _, err := c.do(ctx, http.MethodHead, c.keyURL(key, ""), nil, "")
	return err == nil && resp.StatusCode == http.StatusOK
}

// List returns the keys below prefix ("" for all), recursively or not, in
// certmagic.FileStorage's order.
func (c *Client) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	if prefix != "" {
		if err := certstore.CheckKey(prefix); err != nil {
			return nil, err
		}
	}
	q := "list"
	if recursive {
		q += "&recursive=1"
	}
	_, b, err := c.do(ctx, http.MethodGet, c.keyURL(prefix, q), nil, "")
	if err != nil {
		return nil, err
	}
	var out struct {
		Keys []string `json:"keys"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("storageclient: list %q: decoding answer: %w", prefix, err)
	}
	return out.Keys, nil
}

// Stat describes key.
func (c *Client) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	if err := certstore.CheckKey(key); err != nil {
		return certmagic.KeyInfo{}, err
	}
	_, b, err := c.do(ctx, http.MethodGet, c.keyURL(key, "stat"), nil, "")
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	var st struct {
		Key      string    `json:"key"`
		Modified time.Time `json:"modified"`
		Size     int64     `json:"size"`
		Terminal bool      `json:"terminal"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("storageclient: stat %q: decoding answer: %w", key, err)
	}
	return certmagic.KeyInfo{Key: st.Key, Modified: st.Modified, Size: st.Size, IsTerminal: st.Terminal}, nil
}

type lockBody struct {
	Owner string `json:"owner"`
	Lease string `json:"lease,omitempty"`
	Renew bool   `json:"renew,omitempty"`
}

func (c *Client) lockCall(ctx context.Context, name string, body lockBody) (certstore.Lease, error) {
	if err := certstore.CheckLockName(name); err != nil {
		return certstore.Lease{}, err
	}
	b, _ := json.Marshal(body)
	resp, ans, err := c.do(ctx, http.MethodPost, c.lockURL(name), b, "application/json")
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusConflict && e.Code == "lock held" {
		held := &certstore.HeldError{Name: name}
		if t, perr := time.Parse(time.RFC3339Nano, resp.Header.Get(api.HeaderLockExpires)); perr == nil {
			held.Expires = t
		}
		return certstore.Lease{}, held
	}
	if err != nil {
		return certstore.Lease{}, err
	}
	var l certstore.Lease
	if err := json.Unmarshal(ans, &l); err != nil {
		return certstore.Lease{}, fmt.Errorf("storageclient: lock %q: decoding answer: %w", name, err)
	}
	return l, nil
}

// AcquireLock makes one attempt to take lock name for owner (certstore.LeaseOps).
func (c *Client) AcquireLock(ctx context.Context, name, owner string, lease time.Duration) (certstore.Lease, error) {
	return c.lockCall(ctx, name, lockBody{Owner: owner, Lease: lease.String()})
}

// RenewLock extends a lock owner holds (certstore.LeaseOps).
func (c *Client) RenewLock(ctx context.Context, name, owner string, lease time.Duration) (certstore.Lease, error) {
	return c.lockCall(ctx, name, lockBody{Owner: owner, Lease: lease.String(), Renew: true})
}

// ReleaseLock releases a lock owner holds (certstore.LeaseOps).
func (c *Client) ReleaseLock(ctx context.Context, name, owner string) error {
	if err := certstore.CheckLockName(name); err != nil {
		return err
	}
	b, _ := json.Marshal(lockBody{Owner: owner})
	_, _, err := c.do(ctx, http.MethodDelete, c.lockURL(name), b, "application/json")
	return err
}

// Lock takes lock name, waiting while another holder has it, until ctx is done; the
// lock is renewed in the background until Unlock.
func (c *Client) Lock(ctx context.Context, name string) error {
	if err := certstore.CheckLockName(name); err != nil {
		return err
	}
	return c.locks.Lock(ctx, name)
}

// TryLock makes one attempt at lock name.
func (c *Client) TryLock(ctx context.Context, name string) (bool, error) {
	if err := certstore.CheckLockName(name); err != nil {
		return false, err
	}
	return c.locks.TryLock(ctx, name)
}

// Unlock releases lock name, taken by Lock or TryLock on this Client.
func (c *Client) Unlock(ctx context.Context, name string) error { return c.locks.Unlock(ctx, name) }

// RenewLockLease renews a lock this Client holds now; certstore.ErrLockLost if it was
// taken over. The lease stays Options.LockLease (see certstore.LockManager).
func (c *Client) RenewLockLease(ctx context.Context, name string, d time.Duration) error {
	return c.locks.RenewLockLease(ctx, name, d)
}
