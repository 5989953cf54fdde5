package httpapi

// The routing endpoints: GET /v1/ingress/{format}, a poll or a long-poll, answered
// from the published snapshot.

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render/routing"
)

// maxWait caps ?wait= long-polls.
const maxWait = 60 * time.Second

// handleIngress serves /v1/ingress/routes and /v1/ingress/{format}.
func (s *API) handleIngress(w http.ResponseWriter, r *http.Request) {
	format := chi.URLParam(r, "format")
	admin := s.isAdminToken(bearer(r.Header.Get("Authorization")))
	if admin && format == api.FormatTraefik && s.keysInline() {
		s.rejectRequest(r, "rejected ingress request: admin token on a body with private keys")
		writeError(w, http.StatusForbidden, "forbidden",
			"this node delivers fleet certificates inline (acme.delivery inline): its Traefik configuration carries private keys, which only the ingress token reads; "+
				api.PathIngress+api.FormatRoutes+" is the routing document, without keys")
		s.metrics.Polls.WithLabelValues(metricFormat(format), strconv.Itoa(http.StatusForbidden)).Inc()
		return
	}
	probe, err := s.appliedProbe(r, format, admin)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid applied probe", err.Error())
		s.metrics.Polls.WithLabelValues(metricFormat(format), strconv.Itoa(http.StatusBadRequest)).Inc()
		return
	}
	// A report is recorded only for a poll that was valid (known format, query and
	// groups): serveIngress calls begin once it has checked them, before it serves or
	// holds the poll. The admin token's polls are never reports: it is not an ingress.
	var rep *ingress.Poll
	begin := func() {
		if !admin {
			rep = readReport(s.ingresses, w, r)
		}
	}
	var served ingress.Mark
	code := s.serveIngress(w, r, format, &served, begin, probe)
	s.ingresses.End(rep, code, served)
	s.metrics.Polls.WithLabelValues(metricFormat(format), strconv.Itoa(code)).Inc()
}

func metricFormat(f string) string {
	if f == api.FormatRoutes || f == api.FormatTraefik {
		return f
	}
	return "other"
}

// keysInline: the Traefik configuration this node renders can carry private keys
// (fleet certificates delivered inline).
func (s *API) keysInline() bool {
	return s.cfg.ACMEInline
}

// serveIngress answers a poll; on a 200 it sets served to what the answer carries.
// probe (nil: none) adds the poll's applied probe to a Traefik body (applied.go).
// begin is called once the poll is known valid (format, query, groups), before it is
// served or held.
func (s *API) serveIngress(w http.ResponseWriter, r *http.Request, format string, served *ingress.Mark, begin func(), probe *publish.Probe) int {
	q, code := s.parsePoll(w, r, format)
	if code != 0 {
		return code
	}
	snap := s.pub.Current()
	if snap == nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "draining", "no complete reconcile pass yet")
		return http.StatusServiceUnavailable
	}
	if g := s.groups.unknown(snap, q.groups); g != "" {
		writeError(w, http.StatusNotFound, "unknown group",
			fmt.Sprintf("group %q: no application, platform domain or default names it (an ingress pointed at a typo must not receive an empty configuration)", g))
		return http.StatusNotFound
	}
	begin()
	inm := r.Header.Get("If-None-Match")
	gz := acceptsGzip(r)
	var deadline <-chan time.Time
	if q.wait > 0 && inm != "" {
		t := time.NewTimer(q.wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		prefer := q.prefer
		if snap.Upstreams(prefer) == 0 {
			prefer = "" // a valid name not in the fleet changes nothing
		}
		// popularity counts sources, not polls; probe (nil: none) adds the poll's applied probe
		rend, probed, err := s.pub.GetApplied(snap, sourceOf(r), prefer, format, q.groups, probe)
		if err != nil {
			// prefer was validated above: anything here is the node's own fault.
			s.log.Error("rendering", "format", format, "err", err)
			writeError(w, http.StatusInternalServerError, "render failed", err.Error())
			return http.StatusInternalServerError
		}
		etag := rend.ETag()
		if gz {
			etag = rend.ETagGzip()
		}
		h := w.Header()
		h.Set("Vary", "Accept-Encoding")
		h.Set("Cache-Control", "no-cache")
		if inm != "" && etagMatches(inm, rend) {
			if deadline != nil {
				switch s.park(r, snap, deadline) {
				case parkSuperseded:
					snap = s.pub.Current()
					continue
				case parkGone:
					return 499
				}
				s.armWrite(w) // the answer's time starts after the wait
			}
			h.Set("ETag", etag)
			setStoreMark(h, snap)
			w.WriteHeader(http.StatusNotModified)
			return http.StatusNotModified
		}
		if deadline != nil {
			s.armWrite(w) // a long-poll that waited and saw a new revision
		}
		h.Set("ETag", etag)
		*served = writeRendered(w, r, snap, rend, q.groups, gz)
		served.Probed = probed
		return http.StatusOK
	}
}

// pollQuery is a poll's parameters, checked.
type pollQuery struct {
	wait   time.Duration // ?wait=, at most maxWait (0: answer at once)
	groups []string      // ?group= (nil: every group)
	prefer string        // ?prefer=, "self" resolved ("": none)
}

// parsePoll checks a poll's format and query; on a malformed one it answers and
// returns the status (0: valid).
func (s *API) parsePoll(w http.ResponseWriter, r *http.Request, format string) (pollQuery, int) {
	if format != api.FormatRoutes && format != api.FormatTraefik {
		writeError(w, http.StatusNotFound, "unknown format", fmt.Sprintf("format %q is not registered; only %q", format, api.FormatTraefik))
		return pollQuery{}, http.StatusNotFound
	}
	// r.URL.Query() drops a pair it cannot parse: ?group=eu-1;x would serve every group.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid query", err.Error())
		return pollQuery{}, http.StatusBadRequest
	}
	// A parameter given twice is refused, never the first one taken silently.
	for _, k := range []string{"wait", "prefer"} {
		if len(q[k]) > 1 {
			writeError(w, http.StatusBadRequest, "invalid "+k, fmt.Sprintf("%s: given %d times", k, len(q[k])))
			return pollQuery{}, http.StatusBadRequest
		}
	}
	var p pollQuery
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, "invalid wait", fmt.Sprintf("wait %q: must be a non-negative Go duration such as 30s", v))
			return pollQuery{}, http.StatusBadRequest
		}
		p.wait = min(d, maxWait)
	}
	groups, ok := parseGroupQuery(w, r)
	if !ok {
		return pollQuery{}, http.StatusBadRequest
	}
	p.groups = groups
	preferArg := q.Get("prefer")
	if _, given := q["prefer"]; given && preferArg == "" {
		// "?prefer=" is malformed, not "no preference" (that is leaving it out).
		writeError(w, http.StatusBadRequest, "invalid prefer", "prefer: empty (a node name or self; leave the parameter out for none)")
		return pollQuery{}, http.StatusBadRequest
	}
	if preferArg == "self" {
		preferArg = s.cfg.NodeName
	}
	if preferArg != "" {
		if err := routing.ValidateLabel("prefer", preferArg); err != nil {
			writeError(w, http.StatusBadRequest, "invalid prefer", err.Error())
			return pollQuery{}, http.StatusBadRequest
		}
	}
	p.prefer = preferArg
	return p, 0
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
func (s *API) park(r *http.Request, snap *publish.Snapshot, deadline <-chan time.Time) int {
	s.metrics.LongPolls.Inc()
	defer s.metrics.LongPolls.Dec()
	select {
	case <-snap.Superseded():
		return parkSuperseded
	case <-deadline:
	case <-s.shutdown:
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
