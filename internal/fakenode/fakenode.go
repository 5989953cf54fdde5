// Package fakenode is a node's ingress endpoint (/v1/ingress/traefik and
// /v1/ingress/routes alike) in a test's process, for the tests of what follows it: the
// Traefik provider plugin, internal/follow, the layer-4 front and the Caddy module's
// poller. One body at a time with its ETag, the store serial and epoch it was derived
// from, a long-poll held on If-None-Match while ?wait lasts, switchable failure modes,
// and every request recorded. Every change of its state signals, so a test waits on a
// condition (WaitFor) instead of sleeping.
package fakenode

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/render/routing"
)

// Token is the ingress token a Node accepts unless told another.
const Token = "test-ingress-token"

// Epoch is the store epoch SetDoc sends.
const Epoch = "0123456789abcdef"

// Mode is how a Node answers.
type Mode int

const (
	Serve     Mode = iota // the node protocol: 200 / 304 / long-poll
	Draining              // 503 {"error":"draining"} with Retry-After
	Broken                // the connection is closed without an answer
	Hang                  // never answers until the client gives up
	Status500             // 500 {"error":"internal"}
	Truncated             // 200 whose body stops short of its Content-Length
	Raw                   // 200 with RawBody as is, and an ETag
)

// Request is what a Node saw of one request.
type Request struct {
	At                                 time.Time
	Auth, IfNoneMatch, Wait, Prefer    string
	Group                              string
	Status                             int // 0 when the client went away first
	Ingress, Kind, AppliedSerial       string
	AppliedEpoch, AppliedRevision, Via string // Via: User-Agent
}

// Node is the fake. The exported fields are read and written under its lock: in a
// WaitFor condition, or before the first request.
type Node struct {
	Srv *httptest.Server

	mu         sync.Mutex
	Token      string // the ingress token it accepts (401 otherwise)
	mode       Mode
	body       []byte
	etag       string
	RawBody    []byte
	serial     string        // X-Scafo-Serial on 200 and 304; "" sends none (a legacy node)
	epoch      string        // X-Scafo-Epoch; "" sends none
	changed    chan struct{} // closed and replaced when the revision moves
	IgnoreINM  bool          // answer 200 even when If-None-Match matches
	IgnoreWait bool          // answer 304 at once instead of holding
	NoETag     bool          // send no ETag (a proxy that strips it): nothing to long-poll on
	Waiting    int           // long-polls being held
	Cancelled  int           // requests whose client went away
	Reqs       []Request
	notify     chan struct{}
}

// New starts a Node serving body, closed at the test's end.
func New(t testing.TB, body string) *Node {
	t.Helper()
	n := &Node{Token: Token, changed: make(chan struct{}), notify: make(chan struct{}, 1)}
	n.setBodyLocked([]byte(body))
	n.Srv = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.Srv.Close)
	return n
}

func (n *Node) URL() string { return n.Srv.URL }

// ETagOf is a Node's ETag of a body.
func ETagOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}

// RevisionOf is a Node's X-Scafo-Revision of a body: 32 hex characters.
func RevisionOf(body string) string {
	sum := sha256.Sum256([]byte("revision " + body))
	return hex.EncodeToString(sum[:16])
}

// Body is the body served now.
func (n *Node) Body() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return string(n.body)
}

// SetBody publishes a new revision and wakes held long-polls.
func (n *Node) SetBody(body string) {
	n.mu.Lock()
	n.setBodyLocked([]byte(body))
	n.mu.Unlock()
	n.signal()
}

// SetBodySerial publishes a new revision derived from store serial (in epoch, "" for
// none) and wakes held long-polls.
func (n *Node) SetBodySerial(body string, serial uint64, epoch string) {
	n.mu.Lock()
	n.serial, n.epoch = strconv.FormatUint(serial, 10), epoch
	n.setBodyLocked([]byte(body))
	n.mu.Unlock()
	n.signal()
}

// SetDoc publishes a routing document derived from store serial in Epoch.
func (n *Node) SetDoc(t testing.TB, serial uint64, d *routing.Document) {
	t.Helper()
	b, err := routing.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	n.SetBodySerial(string(b), serial, Epoch)
}

// SetSerial moves the node's serial without changing its body (a pass that derived
// the same revision), waking nothing, as the node does.
func (n *Node) SetSerial(serial uint64) {
	n.mu.Lock()
	n.serial = strconv.FormatUint(serial, 10)
	n.mu.Unlock()
}

// matchesINM is the node's If-None-Match: any listed tag equal to etag.
func matchesINM(inm, etag string) bool {
	for _, t := range strings.Split(inm, ",") {
		if strings.TrimSpace(t) == etag {
			return true
		}
	}
	return false
}

func (n *Node) setBodyLocked(body []byte) {
	n.body = body
	n.etag = ETagOf(string(body))
	close(n.changed)
	n.changed = make(chan struct{})
}

// SetMode changes how the node answers from the next request (a long-poll held now
// answers as the node is when its revision moves or its wait ends).
func (n *Node) SetMode(m Mode) {
	n.mu.Lock()
	n.mode = m
	n.mu.Unlock()
	n.signal()
}

func (n *Node) signal() {
	select {
	case n.notify <- struct{}{}:
	default:
	}
}

// Requests returns a copy of what the node saw.
func (n *Node) Requests() []Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Request(nil), n.Reqs...)
}

// WaitFor blocks until cond (evaluated under the node's lock) holds, or fails the
// test after timeout.
func (n *Node) WaitFor(t testing.TB, what string, timeout time.Duration, cond func(n *Node) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		n.mu.Lock()
		ok := cond(n)
		n.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-n.notify:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s; requests: %+v", timeout, what, n.Requests())
		}
	}
}

func (n *Node) serve(w http.ResponseWriter, r *http.Request) {
	h, q := r.Header, r.URL.Query()
	n.mu.Lock()
	idx := len(n.Reqs)
	n.Reqs = append(n.Reqs, Request{
		At: time.Now(), Auth: h.Get("Authorization"), IfNoneMatch: h.Get("If-None-Match"),
		Wait: q.Get("wait"), Prefer: q.Get("prefer"), Group: q.Get("group"),
		Ingress: h.Get("X-Scafo-Ingress"), Kind: h.Get("X-Scafo-Ingress-Kind"), AppliedSerial: h.Get("X-Scafo-Applied-Serial"),
		AppliedEpoch: h.Get("X-Scafo-Applied-Epoch"), AppliedRevision: h.Get("X-Scafo-Applied-Revision"), Via: h.Get("User-Agent"),
	})
	mode := n.mode
	n.mu.Unlock()
	n.signal()

	status := n.answer(w, r, mode)

	n.mu.Lock()
	n.Reqs[idx].Status = status
	if status == 0 {
		n.Cancelled++
	}
	n.mu.Unlock()
	n.signal()
}

// answer writes the response and returns its status, 0 when none was sent.
func (n *Node) answer(w http.ResponseWriter, r *http.Request, mode Mode) int {
	n.mu.Lock()
	token := n.Token
	n.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+token {
		return writeError(w, http.StatusUnauthorized, "unauthorized")
	}

	switch mode {
	case Draining:
		w.Header().Set("Retry-After", "1")
		return writeError(w, http.StatusServiceUnavailable, "draining")
	case Status500:
		return writeError(w, http.StatusInternalServerError, "internal")
	case Broken:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return -1
	case Hang:
		<-r.Context().Done()
		return 0
	case Truncated:
		n.mu.Lock()
		body, etag := n.body, n.etag
		n.mu.Unlock()
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		return http.StatusOK
	case Raw:
		n.mu.Lock()
		body := n.RawBody
		n.mu.Unlock()
		w.Header().Set("ETag", ETagOf(string(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		return http.StatusOK
	}

	n.mu.Lock()
	body, etag, changed := n.body, n.etag, n.changed
	ignoreINM, ignoreWait, noETag := n.IgnoreINM, n.IgnoreWait, n.NoETag
	n.mu.Unlock()
	setHeaders := func() {
		n.mu.Lock()
		serial, epoch := n.serial, n.epoch
		n.mu.Unlock()
		if serial != "" {
			w.Header().Set("X-Scafo-Serial", serial)
		}
		if epoch != "" {
			w.Header().Set("X-Scafo-Epoch", epoch)
		}
		if !noETag {
			w.Header().Set("ETag", etag)
		}
	}

	inm := r.Header.Get("If-None-Match")
	if inm != "" && matchesINM(inm, etag) && !ignoreINM {
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		if wait > 0 && !ignoreWait {
			n.mu.Lock()
			n.Waiting++
			n.mu.Unlock()
			n.signal()

			timer := time.NewTimer(wait)
			gone := false
		hold:
			for {
				select {
				case <-changed:
					// Like the node: a new revision that a listed tag names still
					// matches, and the poll stays held.
					n.mu.Lock()
					changed = n.changed
					still := matchesINM(inm, n.etag) && n.mode == Serve
					n.mu.Unlock()
					if !still {
						break hold
					}
				case <-timer.C:
					break hold
				case <-r.Context().Done():
					gone = true
					break hold
				}
			}
			timer.Stop()

			n.mu.Lock()
			n.Waiting--
			body, etag = n.body, n.etag
			mode = n.mode
			n.mu.Unlock()
			if gone {
				return 0
			}
			if mode != Serve {
				// Answer as the node is now, not as it was when the poll began.
				return n.answer(w, r, mode)
			}
		}
		if matchesINM(inm, etag) {
			setHeaders()
			w.WriteHeader(http.StatusNotModified)
			return http.StatusNotModified
		}
	}

	setHeaders()
	w.Header().Set("X-Scafo-Revision", RevisionOf(string(body)))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return http.StatusOK
}

func writeError(w http.ResponseWriter, status int, msg string) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
	return status
}
