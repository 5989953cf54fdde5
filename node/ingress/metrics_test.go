package ingress_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/ingress/ingressmetrics"
	"github.com/scafo/ingress/node/store/dir"
)

// gauges is what reg exports: name{state} (or name alone) → value.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The metrics count the fleet's ingresses by state and export the oldest live report's
// age, from the book's view (one node's here, stepped on a virtual clock).
func TestIngressMetricsCountTheFleetByState(t *testing.T) {
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	serial := uint64(1)
	book := ingress.New(ingress.Options{Store: st, Log: slog.New(slog.DiscardHandler), Self: "vps-a",
		Config:  ingress.Config{LostAfter: ptypes.Duration(2 * time.Second), ForgetAfter: ptypes.Duration(time.Hour), MaxTracked: 8},
		Known:   func() (uint64, string) { return serial, "" },
		Current: func() (string, uint64) { return "", serial }})
	book.Now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	ingressmetrics.Register(reg, book, 0) // a view of age 0: every scrape reads the store
	poll := func(name string, at uint64) {
		p, why := book.Begin(ingress.Report{Name: name, Kind: api.KindPlugin, Serial: at})
		if p == nil {
			t.Fatal(why)
		}
		book.End(p, nil)
	}
	const (
		current = `scafo_ingresses{state=current}`
		behind  = `scafo_ingresses{state=behind}`
		lost    = `scafo_ingresses{state=lost}`
		oldest  = `scafo_ingress_oldest_report_seconds`
	)
	poll("edge-1", 1)
	poll("edge-2", 1)
	now = now.Add(1500 * time.Millisecond)
	poll("edge-1", 1)
	if g := gauges(t, reg); g[current] != 2 || g[behind] != 0 || g[lost] != 0 || g[oldest] != 2 {
		t.Errorf("two ingresses current, edge-2 heard from 1.5s ago: %v", g)
	}
	serial = 2 // a write edge-1 applies, edge-2 does not
	poll("edge-1", 2)
	if g := gauges(t, reg); g[current] != 1 || g[behind] != 1 || g[lost] != 0 {
		t.Errorf("edge-2 behind: %v", g)
	}
	now = now.Add(time.Second) // edge-2 past lostAfter
	poll("edge-1", 2)
	if g := gauges(t, reg); g[current] != 1 || g[behind] != 0 || g[lost] != 1 || g[oldest] != 0 {
		t.Errorf("edge-2 lost: %v", g)
	}
}
