package traefikprovider

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
)

const testToken = "test-ingress-token"

// nodeMode is how a fakeNode answers.
type nodeMode int

const (
	modeServe     nodeMode = iota // the node protocol: 200 / 304 / long-poll
	modeDraining                  // 503 {"error":"draining"} with Retry-After
	modeBroken                    // the connection is closed without an answer
	modeHang                      // never answers until the client gives up
	modeStatus500                 // 500 {"error":"internal"}
	modeTruncated                 // 200 whose body stops short of its Content-Length
	modeRaw                       // 200 with rawBody as is, and an ETag
)

// request is what a fakeNode saw of one request.
type request struct {
	at          time.Time
	auth        string
	ifNoneMatch string
	wait        string
	prefer      string
	status      int // 0 when the client went away first
	// The ingress report the request carried.
	ingress, kind, appliedSerial, appliedEpoch, appliedRevision string
}

// fakeNode is an httptest server speaking the scafo node's /v1/ingress/traefik
// protocol, with switchable failure modes. Every change of its state signals on
// notify, so tests wait on conditions instead of sleeping.
type fakeNode struct {
	srv *httptest.Server

	mu         sync.Mutex
	token      string // the ingress token it accepts
	mode       nodeMode
	body       []byte
	etag       string
	rawBody    []byte
	serial     string        // X-Scafo-Serial on 200 and 304; "" sends none (a legacy node)
	epoch      string        // X-Scafo-Epoch; "" sends none
	changed    chan struct{} // closed and replaced when the revision moves
	ignoreINM  bool          // answer 200 even when If-None-Match matches
	ignoreWait bool          // answer 304 at once instead of holding
	waiting    int           // long-polls being held
	cancelled  int           // requests whose client went away
	reqs       []request
	notify     chan struct{}
}

func newFakeNode(t *testing.T, body string) *fakeNode {
	t.Helper()
	n := &fakeNode{token: testToken, changed: make(chan struct{}), notify: make(chan struct{}, 1)}
	n.setBodyLocked(body)
	n.srv = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.srv.Close)
	return n
}

// closedURL returns the URL of a server that is no longer listening.
func closedURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

func (n *fakeNode) URL() string { return n.srv.URL }

func etagOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}

// revisionOf is the fake node's document revision of a body: 32 hex characters.
func revisionOf(body string) string {
	sum := sha256.Sum256([]byte("revision " + body))
	return hex.EncodeToString(sum[:16])
}

// setBody publishes a new revision and wakes held long-polls.
func (n *fakeNode) setBody(body string) {
	n.mu.Lock()
	n.setBodyLocked(body)
	n.mu.Unlock()
	n.signal()
}

// setBodySerial publishes a new revision derived from store serial (in epoch, "" for
// none) and wakes held long-polls.
func (n *fakeNode) setBodySerial(body string, serial uint64, epoch string) {
	n.mu.Lock()
	n.serial, n.epoch = strconv.FormatUint(serial, 10), epoch
	n.setBodyLocked(body)
	n.mu.Unlock()
	n.signal()
}

// setSerial moves the node's serial without changing its body (a pass that derived
// the same revision), waking nothing, as the node does.
func (n *fakeNode) setSerial(serial uint64) {
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

func (n *fakeNode) setBodyLocked(body string) {
	n.body = []byte(body)
	n.etag = etagOf(body)
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *fakeNode) setMode(m nodeMode) {
	n.mu.Lock()
	n.mode = m
	n.mu.Unlock()
	n.signal()
}

func (n *fakeNode) signal() {
	select {
	case n.notify <- struct{}{}:
	default:
	}
}

func (n *fakeNode) requests() []request {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]request(nil), n.reqs...)
}

// waitFor blocks until cond (evaluated under the node's lock) holds, or fails the
// test after timeout.
func (n *fakeNode) waitFor(t *testing.T, what string, timeout time.Duration, cond func(n *fakeNode) bool) {
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
			t.Fatalf("timed out after %s waiting for %s; requests: %+v", timeout, what, n.requests())
		}
	}
}

func (n *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	idx := len(n.reqs)
	n.reqs = append(n.reqs, request{
		at:          time.Now(),
		auth:        r.Header.Get("Authorization"),
		ifNoneMatch: r.Header.Get("If-None-Match"),
		wait:        r.URL.Query().Get("wait"),
		prefer:      r.URL.Query().Get("prefer"),

		ingress:         r.Header.Get("X-Scafo-Ingress"),
		kind:            r.Header.Get("X-Scafo-Ingress-Kind"),
		appliedSerial:   r.Header.Get("X-Scafo-Applied-Serial"),
		appliedEpoch:    r.Header.Get("X-Scafo-Applied-Epoch"),
		appliedRevision: r.Header.Get("X-Scafo-Applied-Revision"),
	})
	mode := n.mode
	n.mu.Unlock()
	n.signal()

	status := n.answer(w, r, mode)

	n.mu.Lock()
	n.reqs[idx].status = status
	if status == 0 {
		n.cancelled++
	}
	n.mu.Unlock()
	n.signal()
}

// answer writes the response and returns its status, 0 when none was sent.
func (n *fakeNode) answer(w http.ResponseWriter, r *http.Request, mode nodeMode) int {
	n.mu.Lock()
	token := n.token
	n.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+token {
		return writeError(w, http.StatusUnauthorized, "unauthorized")
	}

	switch mode {
	case modeDraining:
		w.Header().Set("Retry-After", "1")
		return writeError(w, http.StatusServiceUnavailable, "draining")
	case modeStatus500:
		return writeError(w, http.StatusInternalServerError, "internal")
	case modeBroken:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return -1
	case modeHang:
		<-r.Context().Done()
		return 0
	case modeTruncated:
		n.mu.Lock()
		body, etag := n.body, n.etag
		n.mu.Unlock()
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		return http.StatusOK
	case modeRaw:
		n.mu.Lock()
		body := n.rawBody
		n.mu.Unlock()
		w.Header().Set("ETag", etagOf(string(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		return http.StatusOK
	}

	n.mu.Lock()
	body, etag, changed := n.body, n.etag, n.changed
	ignoreINM, ignoreWait := n.ignoreINM, n.ignoreWait
	n.mu.Unlock()
	setSerial := func() {
		n.mu.Lock()
		serial, epoch := n.serial, n.epoch
		n.mu.Unlock()
		if serial != "" {
			w.Header().Set("X-Scafo-Serial", serial)
		}
		if epoch != "" {
			w.Header().Set("X-Scafo-Epoch", epoch)
		}
	}

	inm := r.Header.Get("If-None-Match")
	if inm != "" && matchesINM(inm, etag) && !ignoreINM {
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		if wait > 0 && !ignoreWait {
			n.mu.Lock()
			n.waiting++
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
					still := matchesINM(inm, n.etag) && n.mode == modeServe
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
			n.waiting--
			body, etag = n.body, n.etag
			mode = n.mode
			n.mu.Unlock()
			if gone {
				return 0
			}
			if mode != modeServe {
				// Answer as the node is now, not as it was when the poll began.
				return n.answer(w, r, mode)
			}
		}
		if matchesINM(inm, etag) {
			setSerial()
			w.Header().Set("ETag", etag)
			w.WriteHeader(http.StatusNotModified)
			return http.StatusNotModified
		}
	}

	setSerial()
	w.Header().Set("ETag", etag)
	w.Header().Set("X-Scafo-Revision", revisionOf(string(body)))
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

// routerConfig returns a small dynamic configuration routing host to backend.
func routerConfig(host, backend string) string {
	cfg := map[string]any{"http": map[string]any{
		"routers": map[string]any{"r": map[string]any{"rule": "Host(`" + host + "`)", "service": "s"}},
		"services": map[string]any{"s": map[string]any{
			"loadBalancer": map[string]any{"servers": []any{map[string]any{"url": backend}}},
		}},
	}}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// logBuf collects a provider's log lines.
type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) add(warn bool, line string) {
	level := "DEBUG"
	if warn {
		level = "WARN"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, level+" "+line)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// count returns how many lines contain s.
func (l *logBuf) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			c++
		}
	}
	return c
}
