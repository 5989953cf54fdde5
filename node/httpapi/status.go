package httpapi

// GET /v1/status: the node's state assembled from its subsystems (api.Status).

import (
	"net/http"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// statusHandler serves /v1/status.
type statusHandler struct {
	nodeName string
	stateDir string        // for the adopt hint
	nodeTTL  time.Duration // reconcile.nodeTTL: a node record not fleet.NodeLive is stale

	rec       Reconciler
	self      SelfRecord
	identity  StoreIdentity
	pub       Publisher
	probes    *probe.Prober
	instances Instances
	ingresses *ingress.Book
	certs     *fleetcerts.Manager
	// middlewares are the Traefik middlewares the configuration declares.
	middlewares []string
}

func (h *statusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := h.rec.Status()
	now := time.Now()
	body := api.Status{
		Node:             h.nodeName,
		Store:            api.Store{Reachable: st.LastError == ""},
		Skipped:          []api.Skipped{},
		Nodes:            []api.Node{},
		MismatchedConfig: st.Mismatched,
		Remembered:       st.Remembered,
		Instances:        h.probes.Status(h.instances.Records()),
	}
	if e := h.self.Err(); e != nil {
		body.Store.Reachable = false
		body.Store.HeartbeatError = *e
	}
	if c := h.self.Conflict(now); c != nil {
		d := &api.DuplicateName{
			Address: self.Address(c.Record), Seen: c.LastSeen.UTC(),
			AgeSeconds: now.Sub(c.LastSeen).Round(time.Second).Seconds(),
			Detail: "another live node writes this node's record: two nodes run with the name " + h.nodeName +
				" and routes flap between them; rename (--node.name) or stop one",
		}
		if b := c.Record.Boot; b != nil {
			d.NodeID, d.Boot = b.Node, b.ID
		}
		body.DuplicateName = d
	}
	if a := h.self.AddressReport(); a != nil {
		body.AddressWarning = &api.AddressWarning{Address: a.Address, SharedWith: a.SharedWith, Loopback: a.Local, LiveNodes: a.LiveNodes,
			Detail: "node.address must be this node's own address on the fleet's private network: instances are published at node.address:port"}
	}
	if h.identity.Foreign() {
		body.Store.Foreign = true
		body.Store.ForeignReason = h.identity.ForeignReason()
		body.Store.Adopt = reconcile.AdoptHint(h.stateDir)
	}
	snap := h.pub.Current()
	if snap != nil {
		body.Ready = true
		body.Revision = snap.Doc().Revision
		since := snap.Since().UTC()
		body.RevisionSince = &since
		body.Groups = groupsStatus(snap)
	}
	if !st.LastPass.IsZero() {
		t := st.LastPass.UTC()
		body.LastPass = &t
	}
	if st.LastError != "" {
		body.Store.Error = st.LastError
		t := st.UnreachableSince.UTC()
		body.Store.UnreachableSince = &t
	}
	// Unreachable through the heartbeat (its write can fail before a reconcile pass
	// does): since the earlier of the two failures (node.TestTheRecordsReportsReachStatusAndMetrics;
	// self.TestAFailingHeartbeatSaysSinceWhen).
	if since := h.self.FailingSince(); body.Store.HeartbeatError != "" && !since.IsZero() &&
		(body.Store.UnreachableSince == nil || since.Before(*body.Store.UnreachableSince)) {
		t := since.UTC()
		body.Store.UnreachableSince = &t
	}
	for _, sk := range st.Skipped {
		body.Skipped = append(body.Skipped, api.Skipped{Object: sk.Object, Reason: sk.Reason})
	}
	ttl := h.nodeTTL
	for _, n := range st.Nodes {
		age := now.Sub(n.Seen)
		body.Nodes = append(body.Nodes, api.Node{
			Name: n.Name, Address: n.Address, Seen: n.Seen.UTC(),
			AgeSeconds: age.Round(time.Second).Seconds(), Stale: !fleet.NodeLive(n.Seen, now, ttl),
		})
	}
	iv := h.ingresses.Fleet(r.Context(), ingress.StatusViewMaxAge)
	body.Ingresses, body.IngressesSkipped, body.IngressesError = iv.Ingresses, iv.Skipped, iv.Error
	body.Certificates = certsStatus(h.certs)
	var doc *routing.Document
	if snap != nil {
		doc = snap.Doc()
	}
	body.Warnings = append(statusWarnings(doc, iv), middlewareWarnings(doc, h.middlewares)...)
	writeJSON(w, http.StatusOK, body)
}
