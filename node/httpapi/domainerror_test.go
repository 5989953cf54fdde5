package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/scafo/ingress/node/store"
)

// TestACancelledWriteIsNotAStoreError: a store call that failed because the client
// cancelled its own request (the S3 backend wraps the cause with store.ErrUnavailable)
// is answered and counted as a cancellation (499), never as a store outage (503) or an
// internal error (500), and logs no error; a real outage is still 503.
func TestACancelledWriteIsNotAStoreError(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, tc := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("s3 store: get %q: %w: %w", "apps/shop.json", store.ErrUnavailable, context.Canceled), StatusClientClosedRequest},
		{fmt.Errorf("reading x: %w", context.Canceled), StatusClientClosedRequest},
		{fmt.Errorf("s3 store: get %q: %w: connection refused", "apps/shop.json", store.ErrUnavailable), http.StatusServiceUnavailable},
	} {
		rec := httptest.NewRecorder()
		writeDomainError(rec, log, tc.err)
		if rec.Code != tc.code {
			t.Errorf("%v: %d, want %d", tc.err, rec.Code, tc.code)
		}
		var body struct{ Error, Detail string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == "" {
			t.Errorf("%v: body %q is not a JSON error", tc.err, rec.Body)
		}
	}
	if bytes.Contains(logs.Bytes(), []byte("level=ERROR")) {
		t.Errorf("a cancellation was logged as an error:\n%s", logs.String())
	}
}
