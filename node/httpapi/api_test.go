package httpapi

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// testMetrics are the API's series, registered on a registry of their own (served on
// the API's /metrics).
func testMetrics() Metrics {
	m := Metrics{
		Registry:  prometheus.NewRegistry(),
		Refused:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"reason"}),
		LongPolls: prometheus.NewGauge(prometheus.GaugeOpts{Name: "longpolls"}),
		Polls:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "polls"}, []string{"format", "code"}),
	}
	m.Registry.MustRegister(m.Refused, m.LongPolls, m.Polls)
	return m
}

// testAPI is an API over d (the subsystems a test needs; the others nil), logging
// nowhere.
func testAPI(t *testing.T, cfg Config, d Deps) *API {
	t.Helper()
	a, err := New(cfg, testLog(), testMetrics(), d)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testLog logs nowhere.
func testLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
