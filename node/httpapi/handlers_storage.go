package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/certstore"
	"github.com/scafo/ingress/node/store"
)

// /v1/storage: the fleet store's certificate namespace over HTTP, with CertMagic's
// Storage semantics (package certstore holds them; these handlers decode, call one
// operation and map its error in storageError). The Go client is package
// node/storageclient.
//
//	GET    /v1/storage/keys/{key}                  load: the value's bytes
//	GET    /v1/storage/keys/{key}?stat             stat: {"key","modified","size","terminal"}
//	HEAD   /v1/storage/keys/{key}                  stat in headers (exists: 200 or 404)
//	GET    /v1/storage/keys[/{prefix}]?list[&recursive=1]   list: {"keys":[…]}
//	PUT    /v1/storage/keys/{key}                  store the body (at most 1 MiB); answers its stat
//	DELETE /v1/storage/keys/{key}                  delete the value and everything below it: {"deleted"}
//	POST   /v1/storage/locks/{name}  {"owner","lease","renew"}   take (or renew) a lock: the lease
//	DELETE /v1/storage/locks/{name}  {"owner"}                   release it: {"released"}
//
// The key is the rest of the path, percent-decoded ("%2F" is a "/": one key has one
// meaning whatever its spelling); each segment of a key with odd characters is
// escaped by the client. Credential: the ingress token only (requireStorageToken). Not
// routed on the public apex (render's DeniedAPIPrefixes lists api.PathStorage).
const (
	// maxLockBody bounds a lock request body (an owner token and a lease).
	maxLockBody = 4 << 10
)

type storageAPI struct {
	log   *slog.Logger
	certs *certstore.Storage
	reqs  *prometheus.CounterVec
	dur   *prometheus.HistogramVec
}

// newStorageAPI builds /v1/storage's handlers (routes.go mounts them); its series are
// registered on reg.
func newStorageAPI(st store.Store, nodeName string, log *slog.Logger, reg *prometheus.Registry) *storageAPI {
	return &storageAPI{
		log:   log,
		certs: certstore.New(st, certstore.Options{Owner: nodeName, Logger: log}),
		reqs: registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_storage_requests_total",
			Help: api.PathStorage + " requests by operation (load, stat, list, store, delete, lock, unlock) and HTTP status.",
		}, []string{"op", "code"})),
		dur: registerOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scafo_storage_request_duration_seconds",
			Help:    api.PathStorage + " request duration by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"op"})),
	}
}

// registerOrReuse registers c, or returns the collector already registered under its
// name (Handler may be built more than once).
func registerOrReuse[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// storageOp names a request's operation for the metrics.
func storageOp(r *http.Request) string {
	locks := strings.HasPrefix(r.URL.Path, api.PathStorageLocks)
	q := r.URL.Query()
	switch {
	case locks && r.Method == http.MethodPost:
		return "lock"
	case locks && r.Method == http.MethodDelete:
		return "unlock"
	case locks:
		return "other"
	case r.Method == http.MethodGet && q.Has("list"):
		return "list"
	case r.Method == http.MethodGet && q.Has("stat"), r.Method == http.MethodHead:
		return "stat"
	case r.Method == http.MethodGet:
		return "load"
	case r.Method == http.MethodPut:
		return "store"
	case r.Method == http.MethodDelete:
		return "delete"
	}
	return "other"
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (a *storageAPI) measure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := storageOp(r)
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(rec, r)
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		a.reqs.WithLabelValues(op, strconv.Itoa(rec.code)).Inc()
		a.dur.WithLabelValues(op).Observe(time.Since(start).Seconds())
	})
}

// pathRest is the percent-decoded rest of r's path after base ("" for base itself).
func pathRest(r *http.Request, base string) (string, error) {
	p := r.URL.EscapedPath()
	rest, ok := strings.CutPrefix(p, base)
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return "", fmt.Errorf("%w: path %q is not under %s", certstore.ErrInvalidKey, p, base)
	}
	rest = strings.TrimPrefix(rest, "/")
	key, err := url.PathUnescape(rest)
	if err != nil {
		return "", fmt.Errorf("%w: %v", certstore.ErrInvalidKey, err)
	}
	return key, nil
}

// storageQuery checks a keys request's query: only the parameters in allowed, flags
// without a value or with 1/true (recursive also 0/false).
func storageQuery(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("query: %v", err)
	}
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok && len(allowed) == 0 {
			return nil, fmt.Errorf("query parameter %q: this request takes none", k)
		}
		if !ok {
			return nil, fmt.Errorf("query parameter %q is not one of %s", k, strings.Join(allowed, ", "))
		}
		if len(vs) != 1 {
			return nil, fmt.Errorf("query parameter %q given %d times", k, len(vs))
		}
		switch vs[0] {
		case "", "1", "true":
		case "0", "false":
			if k != "recursive" {
				return nil, fmt.Errorf("query parameter %q: %q turns nothing off; leave it out", k, vs[0])
			}
		default:
			return nil, fmt.Errorf("query parameter %q: %q is not a flag (empty, 1, true, 0 or false)", k, vs[0])
		}
	}
	if q.Has("list") && q.Has("stat") {
		return nil, errors.New("query: list and stat are exclusive")
	}
	if q.Has("recursive") && !q.Has("list") {
		return nil, errors.New("query parameter \"recursive\" applies to list only")
	}
	return q, nil
}

func flagOn(q url.Values, k string) bool {
	v := q.Get(k)
	return q.Has(k) && v != "0" && v != "false"
}

// storageError maps an error of the certificate namespace (or the store under it) to
// its one status.
func (a *storageAPI) storageError(w http.ResponseWriter, r *http.Request, err error) {
	var held *certstore.HeldError
	switch {
	case errors.Is(err, certstore.ErrInvalidKey):
		what := "invalid key"
		if strings.HasPrefix(r.URL.Path, api.PathStorageLocks) {
			what = "invalid lock name"
		}
		writeError(w, http.StatusBadRequest, what, err.Error())
	case errors.Is(err, certstore.ErrInvalidLockRequest):
		writeError(w, http.StatusBadRequest, "invalid lock request", err.Error())
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, "not found", err.Error())
	case errors.Is(err, certstore.ErrValueTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "value too large", err.Error())
	case errors.As(err, &held):
		if !held.Expires.IsZero() {
			w.Header().Set(api.HeaderLockExpires, held.Expires.UTC().Format(time.RFC3339Nano))
			secs := int(time.Until(held.Expires).Seconds() + 0.999)
			w.Header().Set("Retry-After", strconv.Itoa(min(max(1, secs), 60)))
		} else {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, http.StatusConflict, "lock held", err.Error())
	case errors.Is(err, certstore.ErrLockLost):
		writeError(w, http.StatusConflict, "lock lost", err.Error())
	case errors.Is(err, certstore.ErrNotLockOwner):
		writeError(w, http.StatusConflict, "not lock owner", err.Error())
	case errors.Is(err, certstore.ErrCorrupt):
		a.log.Error("storage: corrupt object in the certificate namespace", "err", err)
		writeError(w, http.StatusInternalServerError, "corrupt store object", err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, StatusClientClosedRequest, "cancelled", "the request was cancelled by its client")
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "store unavailable", err.Error())
	default:
		a.log.Error("storage: request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// storageStat is the JSON of ?stat.
type storageStat struct {
	Key      string    `json:"key"`
	Modified time.Time `json:"modified"`
	Size     int64     `json:"size"`
	Terminal bool      `json:"terminal"`
}

type storageList struct {
	Keys []string `json:"keys"`
}

func (a *storageAPI) get(w http.ResponseWriter, r *http.Request) {
	key, err := pathRest(r, api.PathStorageKeys)
	if err != nil {
		a.storageError(w, r, err)
		return
	}
	q, err := storageQuery(r, "list", "recursive", "stat")
	if err != nil {
		badRequest(w, "invalid query", err)
		return
	}
	ctx := r.Context()
	switch {
	case q.Has("list"):
		keys, err := a.certs.List(ctx, key, flagOn(q, "recursive"))
		if err != nil {
			a.storageError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, storageList{Keys: keys})
	case q.Has("stat"):
		ki, err := a.certs.Stat(ctx, key)
		if err != nil {
			a.storageError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, storageStat{Key: ki.Key, Modified: ki.Modified.UTC(), Size: ki.Size, Terminal: ki.IsTerminal})
	default:
		v, err := a.certs.Load(ctx, key)
		if err != nil {
			a.storageError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(v)))
		w.WriteHeader(http.StatusOK)
		w.Write(v)
	}
}

func (a *storageAPI) head(w http.ResponseWriter, r *http.Request) {
	key, err := pathRest(r, api.PathStorageKeys)
	if err == nil {
		_, err = storageQuery(r)
	}
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ki, err := a.certs.Stat(r.Context(), key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.WriteHeader(http.StatusNotFound)
	case errors.Is(err, certstore.ErrInvalidKey):
		w.WriteHeader(http.StatusBadRequest)
	case errors.Is(err, store.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
	case err != nil:
		w.WriteHeader(http.StatusInternalServerError)
	default:
		w.Header().Set(api.HeaderStorageModified, ki.Modified.UTC().Format(time.RFC3339Nano))
		w.Header().Set(api.HeaderStorageSize, strconv.FormatInt(ki.Size, 10))
		w.Header().Set(api.HeaderStorageTerminal, strconv.FormatBool(ki.IsTerminal))
		w.WriteHeader(http.StatusOK)
	}
}

func (a *storageAPI) put(w http.ResponseWriter, r *http.Request) {
	key, err := pathRest(r, api.PathStorageKeys)
	if err == nil {
		err = certstore.CheckKey(key)
	}
	if err != nil {
		cutBody(w, r)
		a.storageError(w, r, err)
		return
	}
	if _, err := storageQuery(r); err != nil {
		cutBody(w, r)
		badRequest(w, "invalid query", err)
		return
	}
	limit := a.certs.Options().MaxValueSize
	if r.ContentLength > int64(limit) {
		cutBody(w, r)
		a.storageError(w, r, fmt.Errorf("%w: %d bytes announced, limit %d", certstore.ErrValueTooLarge, r.ContentLength, limit))
		return
	}
	value, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		badRequest(w, "invalid body", fmt.Errorf("reading body: %w", err))
		return
	}
	if len(value) > limit {
		cutBody(w, r)
		a.storageError(w, r, fmt.Errorf("%w: more than %d bytes", certstore.ErrValueTooLarge, limit))
		return
	}
	ki, err := a.certs.StoreInfo(r.Context(), key, value)
	if err != nil {
		a.storageError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, storageStat{Key: ki.Key, Modified: ki.Modified.UTC(), Size: ki.Size, Terminal: ki.IsTerminal})
}

func (a *storageAPI) delete(w http.ResponseWriter, r *http.Request) {
	key, err := pathRest(r, api.PathStorageKeys)
	if err != nil {
		a.storageError(w, r, err)
		return
	}
	if _, err := storageQuery(r); err != nil {
		badRequest(w, "invalid query", err)
		return
	}
	if err := a.certs.Delete(r.Context(), key); err != nil {
		a.storageError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": key})
}
