package httpapi

import (
	"io"
	"log/slog"
	"strings"
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

// A registry that already holds the API's series is an error from New, not a panic
// (the storage API's series are reused there).
func TestNewOnARegistryHoldingTheSeriesFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Config{}, testLog(), reg, Deps{}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{}, testLog(), reg, Deps{}); err == nil || !strings.Contains(err.Error(), "registering the API's series") {
		t.Fatalf("a second API on one registry: %v, want an error", err)
	}
}
