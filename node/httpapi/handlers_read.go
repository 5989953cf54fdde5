package httpapi

import (
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/render/routing"
)

// healthHandler answers the health probes: the node's liveness and readiness, and its
// instances' health for Traefik's node-delegated health checks.
type healthHandler struct {
	pub         Publisher
	instances   Instances
	probes      *probe.Prober // nil: probe.interval 0, the port is dialled per request
	nodeAddress string        // node.address: where this node's instances listen
}

func healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (h *healthHandler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.pub.Current() == nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "draining", "no complete reconcile pass yet")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// handleInstanceHealth answers 200 while this node's instance of app is ready and
// accepts TCP connections (or answers its health path); Traefik's node-delegated
// health checks ask here. With probes on (the default) the answer is the prober's last
// verdict, the one this node publishes, and nothing is dialled per request; with
// probe.interval 0 the instance's port is dialled per request.
func (h *healthHandler) instanceHealth(w http.ResponseWriter, r *http.Request) {
	app := chi.URLParam(r, "app")
	if err := routing.ValidateLabel("app", app); err != nil {
		writeError(w, http.StatusBadRequest, "invalid app", err.Error())
		return
	}
	inst, ok := h.instances.Get(app)
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "no instance", "no instance of "+app+" on this node")
		return
	case !inst.Ready:
		writeError(w, http.StatusServiceUnavailable, "not ready", "instance of "+app+" is not ready")
		return
	}
	if h.probes != nil {
		if up, why := h.probes.Ready(app, inst); !up {
			writeError(w, http.StatusServiceUnavailable, "not accepting", "instance of "+app+": "+why)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	addr := net.JoinHostPort(h.nodeAddress, strconv.Itoa(inst.Port))
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "not accepting", "instance of "+app+" does not accept connections")
		return
	}
	c.Close()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
