package httpapi

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// rejectLogger logs a rejection once per source per interval; the next line from that
// source counts the ones not logged in between.
type rejectLogger struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	sources *lru.Cache[string, *rejectSource]
}

type rejectSource struct {
	logged     time.Time
	suppressed int
}

// rejectSources bounds the sources remembered (the least recent is forgotten).
const rejectSources = 4096

func newRejectLogger(log *slog.Logger, every time.Duration) *rejectLogger {
	c, _ := lru.New[string, *rejectSource](rejectSources)
	return &rejectLogger{log: log, every: every, now: time.Now, sources: c}
}

// reject logs msg for remote (host:port or host) unless that host was logged within the
// interval.
func (l *rejectLogger) reject(remote, msg string, attrs ...any) {
	host := sourceKey(hostOf(remote)) // an IPv6 client's /64 is one source
	now := l.now()
	l.mu.Lock()
	src, ok := l.sources.Get(host)
	if ok && now.Sub(src.logged) < l.every {
		src.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := 0
	if ok {
		suppressed = src.suppressed
	}
	l.sources.Add(host, &rejectSource{logged: now})
	l.mu.Unlock()
	attrs = append(attrs, "remote", host)
	if suppressed > 0 {
		attrs = append(attrs, "notLogged", suppressed)
	}
	l.log.Warn(msg, attrs...)
}

// refusals count refused requests and connections (scafo_requests_refused_total, by
// reason) and log them through the rate-limited reject log.
type refusals struct {
	counter *prometheus.CounterVec // reason: one of RefusalReasons
	log     *rejectLogger
}

// count counts one refusal for reason (one of RefusalReasons).
func (f *refusals) count(reason string) {
	f.counter.WithLabelValues(reason).Inc()
}

// request logs a rejected request (rate-limited) and counts it: every refusal for a
// token, 401 or 403, comes through here, and so does the token-lookup budget's 429,
// told apart by its message.
func (f *refusals) request(r *http.Request, msg string) {
	reason := RefusedToken
	if strings.Contains(msg, lookupBudgetMsg) {
		reason = RefusedTokenLookups
	}
	f.count(reason)
	if name := ingressNamed(r); name != "" {
		// A request naming an ingress, without a valid credential: anyone may send the
		// name, so the line says it is claimed, never that this ingress was refused
		// (hostile review 2: an anonymous client made the journal blame a real Traefik).
		f.log.reject(r.RemoteAddr, msg, "path", r.URL.Path, "claimedIngress", name)
		return
	}
	f.log.reject(r.RemoteAddr, msg, "path", r.URL.Path)
}

// unauthorized answers 401 to a request without a valid credential, cheaply: the log
// line is rate-limited per source, and an unread body is not waited for (cutBody).
func (f *refusals) unauthorized(w http.ResponseWriter, r *http.Request, msg, detail string) {
	f.request(r, msg)
	cutBody(w, r)
	w.Header().Set("WWW-Authenticate", `Bearer realm="scafo"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", detail)
}

// lookupBudgetMsg is in the log message of the token-lookup budget's 429 (auth.go);
// TestRefusalsAreCountedByReason holds the two together.
const lookupBudgetMsg = "token lookup budget"

// conn logs and counts a connection refused at limits.maxConns (the listener's bare
// 503, limits.go).
func (f *refusals) conn(remote string, maxConns int) {
	f.count(RefusedConnLimit)
	f.log.reject(remote, "refused connection: at the connection limit", "maxConns", maxConns)
}
