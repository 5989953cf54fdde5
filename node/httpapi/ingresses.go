package httpapi

import (
	"net/http"
	"strings"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/render/routing"
)

// The HTTP side of ingress reports (the book is node/ingress, docs/design.md §11): a
// poll's report headers are read into the book (the fleet view's metrics are the root
// package's, ingressmetrics.go there).

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
