package httpapi

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// testAPI is an API over d (the subsystems a test needs; the others nil), logging
// nowhere.
func testAPI(t *testing.T, cfg Config, d Deps) *API {
	t.Helper()
	a, err := New(cfg, testLog(), prometheus.NewRegistry(), d)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testLog logs nowhere.
func testLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
