package httpapi

// GET /v1/status: the node's state assembled from its subsystems (api.Status).

import (
	"net/http"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
)

func (s *API) handleStatus(w http.ResponseWriter, r *http.Request) {
	st := s.rec.Status()
	now := time.Now()
	body := api.Status{
		Node:             s.cfg.NodeName,
		Store:            api.Store{Reachable: st.LastError == ""},
		Skipped:          []api.Skipped{},
		Nodes:            []api.Node{},
		MismatchedConfig: st.Mismatched,
		Remembered:       st.Remembered,
		Instances:        s.probes.Status(s.instances.Records()),
	}
	if e := s.self.Err(); e != nil {
		body.Store.Reachable = false
		body.Store.HeartbeatError = *e
	}
	if c := s.self.Conflict(now); c != nil {
		d := &api.DuplicateName{
			Address: self.Address(c.Record), Seen: c.LastSeen.UTC(),
			AgeSeconds: now.Sub(c.LastSeen).Round(time.Second).Seconds(),
			Detail: "another live node writes this node's record: two nodes run with the name " + s.cfg.NodeName +
				" and routes flap between them; rename (--node.name) or stop one",
		}
		if b := c.Record.Boot; b != nil {
			d.NodeID, d.Boot = b.Node, b.ID
		}
		body.DuplicateName = d
	}
	if a := s.self.AddressReport(); a != nil {
		body.AddressWarning = &api.AddressWarning{Address: a.Address, SharedWith: a.SharedWith, Loopback: a.Local, LiveNodes: a.LiveNodes,
			Detail: "node.address must be this node's own address on the fleet's private network: instances are published at node.address:port"}
	}
	if s.identity.Foreign() {
		body.Store.Foreign = true
		body.Store.ForeignReason = s.identity.ForeignReason()
		body.Store.Adopt = reconcile.AdoptHint(s.cfg.StateDir)
	}
	if snap := s.pub.Current(); snap != nil {
		body.Ready = true
		body.Revision = snap.Doc().Revision
		since := snap.Since().UTC()
		body.RevisionSince = &since
		body.Groups = s.groupsStatus(snap)
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
	// does): since the earlier of the two failures (TestStoreOutageKeepsServingLastDocument;
	// self.TestAFailingHeartbeatSaysSinceWhen).
	if since := s.self.FailingSince(); body.Store.HeartbeatError != "" && !since.IsZero() &&
		(body.Store.UnreachableSince == nil || since.Before(*body.Store.UnreachableSince)) {
		t := since.UTC()
		body.Store.UnreachableSince = &t
	}
	for _, sk := range st.Skipped {
		body.Skipped = append(body.Skipped, api.Skipped{Object: sk.Object, Reason: sk.Reason})
	}
	ttl := s.cfg.NodeTTL
	for _, n := range st.Nodes {
		age := now.Sub(n.Seen)
		body.Nodes = append(body.Nodes, api.Node{
			Name: n.Name, Address: n.Address, Seen: n.Seen.UTC(),
			AgeSeconds: age.Round(time.Second).Seconds(), Stale: age > ttl,
		})
	}
	iv := s.ingresses.Fleet(r.Context(), ingress.StatusViewMaxAge)
	body.Ingresses, body.IngressesSkipped, body.IngressesError = iv.Ingresses, iv.Skipped, iv.Error
	body.Certificates = s.certsStatus()
	writeJSON(w, http.StatusOK, body)
}
