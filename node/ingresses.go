package node

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/render/routing"
)

// The HTTP side of ingress reports (the book is node/ingress, docs/design.md §11): a
// poll's report headers are read into the book, and the book's fleet view exported as
// metrics.

// readReport reads the report a poll carries (nil when it carries none, or a refused
// one), begins it in the book and says in the answer whether it was recorded.
func readReport(b *ingress.Book, w http.ResponseWriter, r *http.Request) *ingress.Poll {
	if r.Header.Get(api.HeaderIngress) == "" {
		return nil
	}
	rep, err := b.Parse(r.Header)
	if err != nil {
		refuseReport(b, w, r, err.Error())
		return nil
	}
	// Its revision is its selection's: a write elsewhere moves no byte it serves.
	if vals := r.URL.Query()["group"]; len(vals) == 1 {
		if gs, err := routing.ParseGroups(vals[0]); err == nil {
			rep.Groups = strings.Join(gs, ",")
		}
	}
	p, why := b.Begin(rep)
	if why != "" {
		refuseReport(b, w, r, why)
		return nil
	}
	w.Header().Set(api.HeaderIngressReport, "recorded")
	return p
}

// refuseReport answers that a report was not recorded (the poll is still served: a
// report never changes routing); the book logs the reason once a minute.
func refuseReport(b *ingress.Book, w http.ResponseWriter, r *http.Request, why string) {
	w.Header().Set(api.HeaderIngressReport, "refused: "+why)
	b.Refuse(r.RemoteAddr, why)
}

// publishedMark is the published revision and the store serial it is known to be
// derived from ("", 0 before the first pass).
func (s *Server) publishedMark() (string, uint64) {
	snap := s.pub.Current()
	if snap == nil {
		return "", 0
	}
	n, _, _ := snap.Mark()
	return snap.Doc().Revision, n
}

// ingressCollector exports the fleet's ingresses at scrape time, from a view read at
// most once per heartbeat interval (a LIST of ingresses/, and a GET per changed
// report): every node exports the whole fleet, so aggregate with max, not sum.
type ingressCollector struct{ s *Server }

var (
	ingressesDesc = prometheus.NewDesc("scafo_ingresses",
		"Ingresses by state: current (holds what this node publishes), behind (reports an older serial), lost (not heard from for ingresses.lostAfter).",
		[]string{"state"}, nil)
	ingressAgeDesc = prometheus.NewDesc("scafo_ingress_oldest_report_seconds",
		"Age of the oldest report of a live (not lost) ingress; 0 when there is none.", nil, nil)
)

func (c ingressCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ingressesDesc
	ch <- ingressAgeDesc
}

func (c ingressCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v := c.s.ingresses.Fleet(ctx, time.Duration(c.s.cfg.Reconcile.Heartbeat))
	counts := map[string]int{"current": 0, "behind": 0, "lost": 0}
	oldest := 0.0
	for _, in := range v.Ingresses {
		counts[in.State]++
		if in.State != "lost" {
			oldest = max(oldest, in.Age)
		}
	}
	for _, st := range []string{"current", "behind", "lost"} {
		ch <- prometheus.MustNewConstMetric(ingressesDesc, prometheus.GaugeValue, float64(counts[st]), st)
	}
	ch <- prometheus.MustNewConstMetric(ingressAgeDesc, prometheus.GaugeValue, oldest)
}
