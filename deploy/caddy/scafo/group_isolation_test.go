package scafo

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/render/routing"
)

// A Caddy of one ingress group routes only that group's hosts. A group's document
// (?group=) also carries the routes its path maps target in other groups, for their
// upstreams only: Traefik renders no router for them ("their hosts are another
// group's"), and neither may Caddy route their host nor approve a certificate for it.
// The path map still reaches the target.
func TestGroupCaddyNeverRoutesAnotherGroupsHost(t *testing.T) {
	full := &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "go.tito.io", Application: "tito-go", Group: "us", Upstreams: ups("10.0.0.1:4")},
		{Host: "other.example.org", Application: "other", Group: "us", Upstreams: ups("10.0.0.1:5")},
		{Host: "ti.to", Application: "tito-classic", Group: "eu", Upstreams: ups("10.0.0.1:3"),
			Paths: map[string]string{"paulca": "go.tito.io"}},
	}}
	full.Seal()
	doc := routing.ForGroups(full, []string{"eu"})
	body, err := routing.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if routeOf(doc, "go.tito.io") == nil {
		t.Fatal("the group document does not carry the path target; the test proves nothing")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("group") != "eu" {
			http.Error(w, "want group=eu", http.StatusBadRequest)
			return
		}
		w.Header().Set("ETag", `"`+doc.Revision+`"`)
		if r.Header.Get("If-None-Match") == `"`+doc.Revision+`"` {
			<-r.Context().Done() // a long-poll held until the poller leaves: nothing changes
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	p, _ := newTestPoller(t, PollerConfig{Endpoints: []string{srv.URL}, Group: "eu"})
	p.Start()
	t.Cleanup(p.Stop)
	nodetest.WaitFor(t, 10*time.Second, "a document applied", func() bool { return p.Table() != nil })
	tab := p.Table()
	if sel := tab.Lookup("go.tito.io", "/"); sel.Kind != KindNone {
		t.Errorf("go.tito.io (group us) routed by the eu Caddy: %+v", sel)
	}
	if tab.Allowed("go.tito.io") {
		t.Error("on-demand TLS approves go.tito.io, a host of group us")
	}
	if sel := tab.Lookup("ti.to", "/paulca/x"); sel.Target != "go.tito.io" || len(sel.Dials) != 1 || sel.Dials[0] != "10.0.0.1:4" {
		t.Errorf("ti.to/paulca: %+v, want the target go.tito.io", sel)
	}
	if sel := tab.Lookup("ti.to", "/"); sel.Kind != KindRoute || sel.Application != "tito-classic" {
		t.Errorf("ti.to: %+v", sel)
	}
	if !tab.Allowed("ti.to") {
		t.Error("ti.to not approved")
	}
}
