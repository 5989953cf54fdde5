package httpapi

// The routing endpoints: GET /v1/ingress/{format}, a poll or a long-poll, answered
// from the published snapshot.

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/publish"
)

// maxWait caps ?wait= long-polls.
const maxWait = 60 * time.Second

// pollHandler serves the routing endpoints, /v1/ingress/{format}.
type pollHandler struct {
	nodeName string // what ?prefer=self names
	// keysInline: the Traefik configuration this node renders can carry private keys
	// (fleet certificates delivered inline), which only the ingress token reads.
	keysInline bool

	tokens    *nodeTokens
	refused   *refusals
	pub       Publisher
	ingresses *ingress.Book
	writer    *fleetwrite.Writer // the applied probe's MAC
	deadlines *deadlines
	log       *slog.Logger
	polls     *prometheus.CounterVec // format, code
	longPolls prometheus.Gauge
	shutdown  <-chan struct{} // closed on shutdown: releases long-polls
}

func (h *pollHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := chi.URLParam(r, "format")
	code := h.serve(w, r, format)
	h.polls.WithLabelValues(metricFormat(format), strconv.Itoa(code)).Inc()
}

func metricFormat(f string) string {
	if f == api.FormatRoutes || f == api.FormatTraefik {
		return f
	}
	return "other"
}

// serve answers a poll and returns its status. A report is recorded only for a poll
// that was valid (known format, query and groups), begun before it is served or held;
// the admin token's polls are never reports: it is not an ingress, nor is the read-only
// token, which reads the routing document only. Every refusal of a poll is logged at
// WARN naming the ingress it names (refusePoll), and an ingress this node tracks is
// listed refused until a poll of it is recorded again.
func (h *pollHandler) serve(w http.ResponseWriter, r *http.Request, format string) int {
	tok := bearer(r.Header.Get("Authorization"))
	admin := h.tokens.isAdmin(tok)
	if isReadOnlyRequest(r) {
		if code := h.readOnly(w, r, format); code != 0 {
			return code
		}
		admin = true // a reader, never an ingress: no report, no probe
	}
	if admin && format == api.FormatTraefik && h.keysInline {
		h.refusePoll(r, "the admin token on a body with private keys")
		writeError(w, http.StatusForbidden, "forbidden",
			"this node delivers fleet certificates inline (acme.delivery inline): its Traefik configuration carries private keys, which only the ingress token reads; "+
				api.PathIngress+api.FormatRoutes+" is the routing document, without keys")
		return http.StatusForbidden
	}
	p, perr := parsePoll(r, format, h.nodeName, admin)
	if perr != nil {
		h.refusePoll(r, perr.error+": "+perr.detail)
		writeError(w, perr.code, perr.error, perr.detail)
		return perr.code
	}
	if admin && !isReadOnlyRequest(r) && r.Header.Get(api.HeaderIngress) != "" {
		// Served (the admin reads the routing endpoints), but an ingress polling with the
		// admin token is not recorded: said, or it is listed current until it is lost.
		h.refusePoll(r, "the admin token is not an ingress: the poll is served but its report is not recorded; give this ingress the ingress token")
	}
	if p.probe != nil {
		p.probe.MAC = h.appliedMAC
	}
	snap := h.pub.Current()
	if snap == nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "draining", "no complete reconcile pass yet")
		return http.StatusServiceUnavailable
	}
	if g := snap.UnknownGroup(p.groups); g != "" {
		detail := fmt.Sprintf("group %q: no application, platform domain or default names it (an ingress pointed at a typo must not receive an empty configuration)", g)
		h.refusePoll(r, "unknown group: "+detail)
		writeError(w, http.StatusNotFound, "unknown group", detail)
		return http.StatusNotFound
	}
	rep := h.beginReport(w, r, p)
	tracked := "" // the ingress the book tracks: its output is kept among the fleet's
	if rep != nil {
		tracked = p.report.Name
	}
	served, code := h.answer(w, r, snap, p, tracked)
	h.ingresses.End(rep, served)
	return code
}

// readOnly checks a poll with the read-only token: it reads the routing document, never
// the Traefik configuration (which can carry private keys) and never as an ingress (a
// report or an applied probe). It returns the status it answered, 0 to serve the poll.
func (h *pollHandler) readOnly(w http.ResponseWriter, r *http.Request, format string) int {
	detail := ""
	switch {
	case r.Header.Get(api.HeaderIngress) != "" || len(r.Header.Values(api.HeaderAppliedProbe)) > 0:
		detail = "the read-only token is not an ingress: give this ingress the ingress token; " + roleReads[roleReadOnly]
	case format != api.FormatRoutes:
		detail = "the read-only token reads " + api.PathIngress + api.FormatRoutes + " only (" + api.PathIngress + format + " is an ingress's); " + roleReads[roleReadOnly]
	default:
		return 0
	}
	// Logged (rate-limited, naming the ingress when one is named), never marked in the
	// book: the read-only token changes nothing.
	h.refused.count(RefusedToken)
	h.refused.log.reject(r.RemoteAddr, "refused a poll: the read-only token", "ingress", ingressNamed(r), "path", r.URL.Path)
	writeJSON(w, http.StatusForbidden, api.Error{Error: "forbidden", Detail: detail, Role: roleReadOnly})
	return http.StatusForbidden
}

// refusePoll logs, at WARN and rate-limited per source (the reject log), that a poll
// with the ingress or admin token was refused (or, for the admin token, served without
// its report) and why, naming the ingress it names; an ingress this node tracks is
// listed refused with why (ingress.Book.RefusePoll) until a poll of it is recorded again.
func (h *pollHandler) refusePoll(r *http.Request, why string) {
	name := ingressNamed(r)
	h.refused.log.reject(r.RemoteAddr, "refused an ingress's poll", "ingress", name, "reason", why, "path", r.URL.Path)
	if name != "" && h.ingresses != nil { // nil: a test's API without a book
		h.ingresses.RefusePoll(name, why)
	}
}

// ingressNamed is the ingress a request names (api.HeaderIngress as sent, "" for none),
// cut to 64 bytes for a log line (a name is at most 63).
func ingressNamed(r *http.Request) string {
	name := r.Header.Get(api.HeaderIngress)
	if len(name) > 64 {
		name = strings.ToValidUTF8(name[:64], "") + "..."
	}
	// Said as sent, but in ASCII: a control or bidirectional character would reach the
	// journal raw in the JSON log format.
	if q := strconv.QuoteToASCII(name); q[1:len(q)-1] != name {
		name = q
	}
	return name
}

// beginReport records the report a poll carries in the book (nil when it carries none,
// or a refused one) and says in the answer whether it was recorded: a refused report
// never changes the answer.
func (h *pollHandler) beginReport(w http.ResponseWriter, r *http.Request, p pollRequest) *ingress.Poll {
	why := ""
	switch {
	case p.report == nil && p.reportErr == nil:
		return nil
	case p.reportErr != nil:
		why = p.reportErr.Error()
	default:
		var poll *ingress.Poll
		if poll, why = h.ingresses.Begin(*p.report); why == "" {
			w.Header().Set(api.HeaderIngressReport, "recorded")
			return poll
		}
	}
	w.Header().Set(api.HeaderIngressReport, "refused: "+why)
	name := ingressNamed(r)
	h.ingresses.Refuse(r.RemoteAddr, name, why)
	h.ingresses.RefusePoll(name, "its report is refused (the poll is served): "+why)
	return nil
}

// answer serves a valid poll from snap (holding a long-poll until a new revision, its
// wait or shutdown) for the tracked ingress ("": none): the status, and on a 200 what
// the answer carried.
func (h *pollHandler) answer(w http.ResponseWriter, r *http.Request, snap *publish.Snapshot, p pollRequest, tracked string) (*ingress.Mark, int) {
	inm := r.Header.Get("If-None-Match")
	gz := acceptsGzip(r)
	var deadline <-chan time.Time
	if p.wait > 0 && inm != "" {
		t := time.NewTimer(p.wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		rend, err := h.pub.Body(snap, publish.Request{Format: p.format, Prefer: p.prefer, Groups: p.groups, Probe: p.probe, Ingress: tracked})
		if err != nil {
			// prefer was validated above: anything here is the node's own fault.
			h.log.Error("rendering", "format", p.format, "err", err)
			writeError(w, http.StatusInternalServerError, "render failed", err.Error())
			return nil, http.StatusInternalServerError
		}
		etag := rend.ETag()
		if gz {
			etag = rend.ETagGzip()
		}
		hd := w.Header()
		hd.Set("Vary", "Accept-Encoding")
		if inm != "" && etagMatches(inm, rend) {
			if deadline != nil {
				switch h.park(r, snap, deadline) {
				case parkSuperseded:
					snap = h.pub.Current()
					continue
				case parkGone:
					return nil, 499
				}
				h.deadlines.armWrite(w) // the answer's time starts after the wait
			}
			hd.Set("ETag", etag)
			setStoreMark(hd, snap)
			w.WriteHeader(http.StatusNotModified)
			return nil, http.StatusNotModified
		}
		if deadline != nil {
			h.deadlines.armWrite(w) // a long-poll that waited and saw a new revision
		}
		hd.Set("ETag", etag)
		served := writeRendered(w, r, snap, rend, p.groups, gz)
		served.Probed = rend.Probed()
		return &served, http.StatusOK
	}
}

// writeRendered answers a poll 200 with rend (its ETag already set) and returns the
// mark the answer carries.
func writeRendered(w http.ResponseWriter, r *http.Request, snap *publish.Snapshot, rend *publish.Rendered, groups []string, gz bool) ingress.Mark {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(api.HeaderRevision, rend.Revision())
	if groups != nil {
		if empty := snap.EmptyGroups(groups); empty != "" {
			h.Set(api.HeaderGroupEmpty, empty)
		} else {
			h.Del(api.HeaderGroupEmpty)
		}
	}
	setStoreMark(h, snap)
	body, file := rend.Body(), rend.File()
	if gz {
		h.Set("Content-Encoding", "gzip")
		body, file = rend.Gzip(), rend.GzFile()
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	serial, epoch, _ := snap.Mark()
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		writeBody(w, body, file)
	}
	return ingress.Mark{Serial: serial, Epoch: epoch, Revision: rend.Revision()}
}

// How a parked long-poll's wait ended.
const (
	parkEnded      = iota // its wait is over, or the node shuts down: answer 304
	parkSuperseded        // a new revision: serve it
	parkGone              // the client went away
)

// park holds a long-poll until snap is superseded, its deadline, shutdown or the
// client leaving, counted in scafo_longpolls_parked meanwhile.
func (h *pollHandler) park(r *http.Request, snap *publish.Snapshot, deadline <-chan time.Time) int {
	h.longPolls.Inc()
	defer h.longPolls.Dec()
	select {
	case <-snap.Superseded():
		return parkSuperseded
	case <-deadline:
	case <-h.shutdown:
	case <-r.Context().Done():
		return parkGone
	}
	return parkEnded
}

// setStoreMark sends the store serial (and epoch) snap was derived from, on every 200
// and 304 of the routing endpoints: headers, so bodies stay byte-identical across
// nodes. The provider plugin never applies a configuration of an older serial than one
// it applied (docs/design.md §6).
func setStoreMark(h http.Header, snap *publish.Snapshot) {
	serial, epoch, ok := snap.Mark()
	if !ok {
		return
	}
	h.Set(api.HeaderSerial, strconv.FormatUint(serial, 10))
	if epoch != "" {
		h.Set(api.HeaderEpoch, epoch)
	}
}

// writeBody sends a rendered body. Large bodies go out with sendfile(2) from their spill
// file (net/http's ResponseWriter does that for an *os.File), which spares the copy
// through user space that dominates a poll of a 10 000-route configuration; the
// in-memory bytes are the fallback. Both hold the same bytes.
func writeBody(w http.ResponseWriter, body []byte, file string) {
	if file != "" && len(body) >= SendfileMin {
		if f, err := os.Open(file); err == nil {
			defer f.Close()
			if n, err := io.Copy(w, f); err == nil || n > 0 {
				return // sent, or the client went away mid-body
			}
		}
	}
	w.Write(body)
}

// SendfileMin is the body size from which sendfile beats a write from memory (the open
// and close cost two syscalls).
const SendfileMin = 64 << 10

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q > 0
		}
		return true
	}
	return false
}

// etagMatches implements If-None-Match (weak comparison, as RFC 9110 asks for it): any
// listed tag naming either representation of this body matches.
func etagMatches(header string, rend *publish.Rendered) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" {
			return true
		}
		t = strings.TrimPrefix(t, "W/")
		if t == rend.ETag() || t == rend.ETagGzip() {
			return true
		}
	}
	return false
}
