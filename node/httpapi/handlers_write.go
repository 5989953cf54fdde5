package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
)

// The write API: each handler decodes, calls one operation of the write domain
// (package fleetwrite) with the caller, and maps its error with writeDomainError.

// maxBody bounds every request body.
const maxBody = 2 << 20

// refuseWritesToAForeignStore answers 503 to every write-API request while the store
// does not look like the one this node served (store.Identity.Foreign): a write there
// would land in a store no node publishes from.
func refuseWritesToAForeignStore(identity StoreIdentity) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if identity.Foreign() {
				w.Header().Set("Retry-After", "30")
				writeError(w, http.StatusServiceUnavailable, "store unavailable",
					"the store is not the one this node served ("+identity.ForeignReason()+"); nothing was written; "+
						"if this store is meant to be the fleet's, run `scafo-node store adopt` on this node: it then accepts the store as it is")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// ---- decoding and errors ----

// decodeStrict decodes a JSON body into v: bounded size, unknown fields refused, one
// value only.
func decodeStrict(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return jsonx.DecodeStrict(body, v)
}

// readBody reads a request body of at most maxBody bytes.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("body larger than %d bytes", maxBody)
	}
	return body, nil
}

func badRequest(w http.ResponseWriter, what string, err error) {
	writeError(w, http.StatusBadRequest, what, err.Error())
}

// StatusClientClosedRequest answers (and counts, in metrics) a request its client
// cancelled while the node was working on it: nginx's 499. The client is gone; the
// code is for logs and metrics, where it is not an error of the node or its store.
const StatusClientClosedRequest = 499

// writeDomainError maps an error of the write domain (or the store under it) to its
// one status.
func writeDomainError(w http.ResponseWriter, log *slog.Logger, err error) {
	var (
		inv  *fleetwrite.ErrInvalid
		conf *fleetwrite.ErrConflict
		forb *fleetwrite.ErrForbidden
		bad  *fleetwrite.ErrCorrupt
		rb   *fleetwrite.ErrRouteBudget
	)
	switch {
	case errors.As(err, &rb):
		w.Header().Set("Retry-After", strconv.Itoa(fleetwrite.RetrySeconds(rb.RetryAfter)))
		writeError(w, http.StatusTooManyRequests, "routing change budget", rb.Error())
	case errors.As(err, &bad):
		// The store holds bytes that are not an object: the node's data, not the
		// request, is at fault, and the answer says what can be done.
		writeError(w, http.StatusConflict, "corrupt object",
			bad.Error()+"; the object in the store does not decode: DELETE it (admin) and write it again")
	case errors.As(err, &inv):
		writeError(w, http.StatusBadRequest, inv.What, inv.Error())
	case errors.As(err, &conf):
		writeError(w, http.StatusConflict, conf.What, conf.Detail)
	case errors.As(err, &forb):
		writeError(w, http.StatusForbidden, forb.What, forb.Detail)
	case errors.Is(err, fleetwrite.ErrPrecondition), errors.Is(err, store.ErrPreconditionFailed):
		writeError(w, http.StatusPreconditionFailed, "precondition failed", err.Error()+"; re-read it and retry")
	case errors.Is(err, fleetwrite.ErrPortTaken):
		writeError(w, http.StatusConflict, "port taken", err.Error())
	case errors.Is(err, fleetwrite.ErrPortChurn):
		writeError(w, http.StatusConflict, "port churn", err.Error())
	case errors.Is(err, fleetwrite.ErrNoInstance):
		writeError(w, http.StatusNotFound, "no instance", err.Error()+" (POST allocates one)")
	case errors.Is(err, fleetwrite.ErrNoFreePort):
		writeError(w, http.StatusServiceUnavailable, "no free port", err.Error())
	case errors.Is(err, fleetwrite.ErrPortOutOfRange):
		writeError(w, http.StatusBadRequest, "invalid port", err.Error())
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not found", err.Error())
	case errors.Is(err, context.Canceled):
		// The client cancelled its own request during a store call: not a store
		// problem, and not logged as one (TestACancelledWriteIsNotAStoreError).
		log.Debug("request cancelled by its client", "err", err)
		writeError(w, StatusClientClosedRequest, "cancelled", "the request was cancelled by its client; nothing was written")
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrForeign):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "store unavailable", err.Error()+": the store is unreachable; nothing was written")
	default:
		log.Error("write failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// writeObject answers with an object and its ETag.
func writeObject(w http.ResponseWriter, code int, etag string, v any) {
	if etag != "" {
		w.Header().Set("ETag", quoteETag(etag))
	}
	writeJSON(w, code, v)
}

// The store's etags are opaque tokens; on the wire they are quoted strong ETags.
func quoteETag(e string) string {
	if strings.HasPrefix(e, `"`) {
		return e
	}
	return `"` + e + `"`
}

// ifMatch returns the If-Match header as sent ("" when absent): "*" or a list of entity
// tags, which the write domain compares with the object's etag (fleetwrite.sameETag:
// "*" matches any current representation, a weak tag never matches).
func ifMatch(r *http.Request) string {
	return strings.TrimSpace(r.Header.Get("If-Match"))
}

// writeConditionalError is writeDomainError for a write that may carry If-Match: when
// the object it names does not exist, no If-Match can match ("*" included), so the
// answer is 412, not 404 (RFC 9110 §13.1.1).
func writeConditionalError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if ifMatch(r) != "" && errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusPreconditionFailed, "precondition failed",
			"If-Match, but "+err.Error()+"; re-read it and retry")
		return
	}
	writeDomainError(w, log, err)
}

func created(c bool) int {
	if c {
		return http.StatusCreated
	}
	return http.StatusOK
}
