// Package ingressmetrics exports the ingress book (node/ingress) to Prometheus: a
// package of its own, so node/ingress stays free of net/http (the layering test).
package ingressmetrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/ingress"
)

// Register registers the fleet's ingresses, exported at scrape time from a view of book
// read at most once per heartbeat (a LIST of ingresses/, and a GET per changed report):
// every node exports the whole fleet, so aggregate with max, not sum.
func Register(reg prometheus.Registerer, book *ingress.Book, heartbeat time.Duration) {
	reg.MustRegister(collector{book: book, heartbeat: heartbeat})
}

type collector struct {
	book      *ingress.Book
	heartbeat time.Duration
}

var (
	ingressesDesc = prometheus.NewDesc("scafo_ingresses",
		"Ingresses by state: current (holds what this node publishes), behind (reports an older serial), refused (its last poll was refused), lost (not heard from for ingresses.lostAfter).",
		[]string{"state"}, nil)
	ingressAgeDesc = prometheus.NewDesc("scafo_ingress_oldest_report_seconds",
		"Age of the oldest report of a live (not lost) ingress; 0 when there is none.", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ingressesDesc
	ch <- ingressAgeDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v := c.book.Fleet(ctx, c.heartbeat)
	counts := map[string]int{"current": 0, "behind": 0, "refused": 0, "lost": 0}
	oldest := 0.0
	for _, in := range v.Ingresses {
		counts[in.State]++
		if in.State != "lost" {
			oldest = max(oldest, in.Age)
		}
	}
	for _, st := range []string{"current", "behind", "refused", "lost"} {
		ch <- prometheus.MustNewConstMetric(ingressesDesc, prometheus.GaugeValue, float64(counts[st]), st)
	}
	ch <- prometheus.MustNewConstMetric(ingressAgeDesc, prometheus.GaugeValue, oldest)
}
