package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/render/routing"
)

// maxWait caps ?wait= long-polls.
const maxWait = 60 * time.Second

func (s *API) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *API) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.pub.Current() == nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "draining", "no complete reconcile pass yet")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *API) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{})
}

// handleInstanceHealth answers 200 while this node's instance of app is ready and
// accepts TCP connections (or answers its health path); Traefik's node-delegated
// health checks ask here. With probes on (the default) the answer is the prober's last
// verdict, the one this node publishes, and nothing is dialled per request; with
// probe.interval 0 the instance's port is dialled per request.
func (s *API) handleInstanceHealth(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := routing.ValidateLabel("app", app); err != nil {
		writeError(w, http.StatusBadRequest, "invalid app", err.Error())
		return
	}
	inst, ok := s.instances.Get(app)
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "no instance", "no instance of "+app+" on this node")
		return
	case !inst.Ready:
		writeError(w, http.StatusServiceUnavailable, "not ready", "instance of "+app+" is not ready")
		return
	}
	if s.probes != nil {
		if up, why := s.probes.Ready(app, inst); !up {
			writeError(w, http.StatusServiceUnavailable, "not accepting", "instance of "+app+": "+why)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	addr := net.JoinHostPort(s.cfg.NodeAddress, strconv.Itoa(inst.Port))
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "not accepting", "instance of "+app+" does not accept connections")
		return
	}
	c.Close()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

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
