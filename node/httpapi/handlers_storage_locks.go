package httpapi

// The storage API's issuance locks: POST and DELETE /v1/storage/locks/{name}.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/certstore"
	"github.com/scafo/ingress/node/internal/jsonx"
)

// lockRequest is the body of POST and DELETE /v1/storage/locks/{name}.
type lockRequest struct {
	// Owner is the caller's secret token for this acquisition (printable ASCII, at
	// most 256 bytes): only it renews or releases the lock. Required.
	Owner string `json:"owner"`
	// Lease is a Go duration ("2m"), between 1s and 1h; default 2m. POST only.
	Lease string `json:"lease,omitempty"`
	// Renew, on POST, extends a lock the owner holds and never takes a free one
	// (409 "lock lost" if it is gone or another owner's).
	Renew bool `json:"renew,omitempty"`
}

func (a *storageAPI) lockBody(w http.ResponseWriter, r *http.Request) (string, lockRequest, bool) {
	name, err := pathRest(r, api.PathStorageLocks)
	if err == nil {
		err = certstore.CheckLockName(name)
	}
	if err != nil {
		cutBody(w, r)
		a.storageError(w, r, err)
		return "", lockRequest{}, false
	}
	if len(r.URL.RawQuery) > 0 {
		cutBody(w, r)
		badRequest(w, "invalid query", errors.New("lock requests take no query parameters"))
		return "", lockRequest{}, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxLockBody+1))
	if err != nil {
		badRequest(w, "invalid body", fmt.Errorf("reading body: %w", err))
		return "", lockRequest{}, false
	}
	if len(body) > maxLockBody {
		cutBody(w, r)
		writeError(w, http.StatusRequestEntityTooLarge, "body too large", fmt.Sprintf("a lock request body is at most %d bytes", maxLockBody))
		return "", lockRequest{}, false
	}
	var req lockRequest
	if err := jsonx.DecodeStrict(body, &req); err != nil {
		badRequest(w, "invalid body", err)
		return "", lockRequest{}, false
	}
	if req.Owner == "" {
		badRequest(w, "invalid lock request", errors.New(`field "owner" is required`))
		return "", lockRequest{}, false
	}
	return name, req, true
}

func (a *storageAPI) lock(w http.ResponseWriter, r *http.Request) {
	name, req, ok := a.lockBody(w, r)
	if !ok {
		return
	}
	lease := a.certs.Options().LockLease
	if req.Lease != "" {
		d, err := time.ParseDuration(req.Lease)
		if err != nil {
			badRequest(w, "invalid lock request", fmt.Errorf(`field "lease": %v`, err))
			return
		}
		lease = d
	}
	var l certstore.Lease
	var err error
	if req.Renew {
		l, err = a.certs.RenewLock(r.Context(), name, req.Owner, lease)
	} else {
		l, err = a.certs.AcquireLock(r.Context(), name, req.Owner, lease)
	}
	if err != nil {
		a.storageError(w, r, err)
		return
	}
	l.Acquired, l.Expires = l.Acquired.UTC(), l.Expires.UTC()
	writeJSON(w, http.StatusOK, l)
}

func (a *storageAPI) unlock(w http.ResponseWriter, r *http.Request) {
	name, req, ok := a.lockBody(w, r)
	if !ok {
		return
	}
	if req.Lease != "" || req.Renew {
		badRequest(w, "invalid lock request", errors.New(`an unlock takes only "owner"`))
		return
	}
	if err := a.certs.ReleaseLock(r.Context(), name, req.Owner); err != nil {
		a.storageError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"released": name})
}
