package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// maxApplyWait caps ?timeout= of wait=applied; defaultApplyWait is its default.
const (
	maxApplyWait     = 60 * time.Second
	defaultApplyWait = 10 * time.Second
)

// ?wait=applied&timeout=<duration> on a write (docs/design.md §11): the write is made as
// without it; then the answer waits until this node publishes a document derived from
// the write's serial or a later one, and every live ingress (not lost) reports that
// serial or later (or the same revision this node publishes from that serial on), and
// is 200, or 202 when timeout ends first, naming the ingresses still behind.
// The write's own answer is the envelope's "result".
//
// Waiting holds no lock and no store slot: the write is complete before it starts; the
// waiter polls the book (a shared store read at most every ingress.ViewMaxAge) in the
// request's own goroutine, and ends with the request. At most 64 writes wait at
// once on a node; beyond, a write asking to wait is refused (503) before it is made.

// applyWait parses ?wait= and ?timeout= of a write. ok false: no wait asked.
func applyWait(r *http.Request) (d time.Duration, ok bool, what string, err error) {
	// r.URL.Query() drops a pair it cannot parse: ?wait=applied;timeout=1s would write
	// without waiting. A write's query must parse.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return 0, false, "invalid query", err
	}
	wait, hasWait := q["wait"]
	timeout, hasTimeout := q["timeout"]
	if !hasWait && !hasTimeout {
		return 0, false, "", nil
	}
	if !hasWait {
		return 0, false, "invalid timeout", fmt.Errorf("timeout: only with wait=applied")
	}
	if len(wait) != 1 || wait[0] != "applied" {
		return 0, false, "invalid wait", fmt.Errorf("wait %q: the only value is \"applied\"", strings.Join(wait, ","))
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return 0, false, "invalid wait", fmt.Errorf("wait=applied: only on a write (PUT, POST, DELETE)")
	}
	d = defaultApplyWait
	if hasTimeout {
		if len(timeout) != 1 {
			return 0, false, "invalid timeout", fmt.Errorf("timeout: given %d times", len(timeout))
		}
		v, perr := time.ParseDuration(timeout[0])
		switch {
		case perr != nil:
			return 0, false, "invalid timeout", fmt.Errorf("timeout %.30q: want a Go duration such as 10s", timeout[0])
		case v <= 0:
			return 0, false, "invalid timeout", fmt.Errorf("timeout %s: must be positive", v)
		case v > maxApplyWait:
			return 0, false, "invalid timeout", fmt.Errorf("timeout %s: at most %s", v, maxApplyWait)
		}
		d = v
	}
	return d, true, "", nil
}

// appliedWaiter is ?wait=applied on the write API.
type appliedWaiter struct {
	st        store.Store
	ingresses *ingress.Book
	self      SelfRecord
	instances Instances
	probes    *probe.Prober // nil: probe.interval 0
	deadlines *deadlines
	// instanceWrite: the route r matched is an instance write (its attribute, routes.go).
	instanceWrite func(r *http.Request) bool
	// kickHeartbeat asks for this node's record to be rewritten now.
	kickHeartbeat func()
}

// wait is the write API's middleware for ?wait=applied.
func (a *appliedWaiter) wait(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok, what, err := applyWait(r)
		if err != nil {
			cutBody(w, r)
			writeError(w, http.StatusBadRequest, what, err.Error())
			return
		}
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		// An account's writes hold at most ingress.MaxWaitersPerAccount of the node's slots, so
		// one tenant cannot take every slot from the others (the admin is not limited).
		account := ""
		if who := actorOf(r); !who.Admin {
			account = who.Token.Account
		}
		if ok, why := a.ingresses.TakeWaiter(account); !ok {
			cutBody(w, r)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "too many waiters", why)
			return
		}
		defer a.ingresses.ReleaseWaiter(account)
		if a.instanceWrite(r) {
			a.waitInstance(w, r, next, chi.URLParam(r, "app"), d)
			return
		}
		sink := &fleetwrite.SerialSink{}
		rec := &recorder{w: w, h: http.Header{}}
		next.ServeHTTP(rec, r.WithContext(fleetwrite.WithSerialSink(r.Context(), sink)))
		if rec.code < 200 || rec.code > 299 {
			rec.replay()
			return
		}
		serial := sink.Serial()
		if serial == 0 {
			// Nothing changed: what the write asked for is in the store, announced at
			// or before the store's serial now.
			n, _, err := store.ReadSerial(r.Context(), a.st)
			if err != nil {
				w.Header().Set("Retry-After", "5")
				writeError(w, http.StatusServiceUnavailable, "store unavailable", "the write changed nothing; reading the serial to wait for: "+err.Error())
				return
			}
			serial = n
		}
		body, done := a.ingresses.Await(r.Context(), serial, d)
		if !done {
			return // the client went away
		}
		a.answer(w, rec, body)
	})
}

// answer wraps a write's recorded answer in the wait's envelope: 200 when applied, 202
// when the wait ended first.
func (a *appliedWaiter) answer(w http.ResponseWriter, rec *recorder, body api.Applied) {
	code := http.StatusAccepted
	if body.Applied {
		code = http.StatusOK
	}
	a.deadlines.armWrite(w) // the answer's time starts after the wait
	body.Result = json.RawMessage(bytes.TrimSpace(rec.body.Bytes()))
	if len(body.Result) == 0 {
		body.Result = json.RawMessage("null")
	}
	for k, v := range rec.h {
		if k != "Content-Length" && k != "Content-Type" {
			w.Header()[k] = v
		}
	}
	writeJSON(w, code, body)
}

// probeUp is the prober's verdict on app's declared instance (true without a prober).
func (a *appliedWaiter) probeUp(app string, inst fleet.Instance) bool {
	if a.probes == nil {
		return true
	}
	up, _ := a.probes.Ready(app, inst)
	return up
}

// waitInstanceApplied serves an instance write (allocate, set, release) with
// ?wait=applied (docs/design.md §13). An instance is not announced by the write itself but by
// this node's record, which the heartbeat loop rewrites at once after the change: the
// wait has two legs within the one timeout. First, this node's record announces the
// write (the instance with the port and readiness it declares, or none after a
// release; an instance declared ready that the probe finds down is waited past: traffic
// would not reach it), at some serial; then s.ingresses.Await waits until this node publishes
// that serial and every live ingress holds it. 202 when either leg times out, saying which.
func (a *appliedWaiter) waitInstance(w http.ResponseWriter, r *http.Request, next http.Handler, app string, d time.Duration) {
	deadline := time.Now().Add(d)
	rec := &recorder{w: w, h: http.Header{}}
	next.ServeHTTP(rec, r)
	if rec.code < 200 || rec.code > 299 {
		rec.replay()
		return
	}
	gen := a.self.Generation() // the write's change (if it changed anything) is at or before it
	declared, held := a.instances.Get(app)
	a.kickHeartbeat()
	serial, ok, why := a.self.Await(r.Context(), gen, deadline, func(pub map[string]fleet.Instance) string {
		got, has := pub[app]
		switch {
		case !held && has:
			return fmt.Sprintf("this node's record still names an instance of %s (port %d)", app, got.Port)
		case !held:
			return ""
		case !has || got.Port != declared.Port:
			return fmt.Sprintf("this node's record does not yet name %s on port %d", app, declared.Port)
		case declared.Ready && !got.Ready, declared.Ready && !a.probeUp(app, declared):
			// The second: the probe has turned it down and the record saying so is being
			// written (the announcement read above is the one before it).
			why := "probe failed"
			if a.probes != nil {
				if _, w := a.probes.Ready(app, declared); w != "" {
					why = w
				}
			}
			return fmt.Sprintf("the instance of %s on port %d is declared ready but this node's probe finds it down (%s): no traffic reaches it", app, declared.Port, why)
		case got.Ready != declared.Ready:
			return fmt.Sprintf("this node's record does not yet name %s's readiness %v", app, declared.Ready)
		}
		return ""
	})
	if r.Context().Err() != nil {
		return // the client went away
	}
	if !ok {
		a.answer(w, rec, api.Applied{Behind: []api.Ingress{}, Detail: fmt.Sprintf("after %s, %s", d, why)})
		return
	}
	body, done := a.ingresses.Await(r.Context(), serial, max(time.Until(deadline), time.Millisecond))
	if !done {
		return
	}
	a.answer(w, rec, body)
}

// recorder keeps a write's answer so it can be wrapped after the wait.
type recorder struct {
	w    http.ResponseWriter
	h    http.Header
	code int
	body bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// replay sends the recorded answer as it was.
func (r *recorder) replay() {
	for k, v := range r.h {
		r.w.Header()[k] = v
	}
	if r.code == 0 {
		r.code = http.StatusOK
	}
	r.w.WriteHeader(r.code)
	r.w.Write(r.body.Bytes())
}
