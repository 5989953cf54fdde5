package node

import (
	"github.com/prometheus/client_golang/prometheus"
	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/fleetcerts"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/internal/fdlimit"
	"github.com/scafo/ingress/node/probe"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
)

// What the package's external tests (package node_test) reach of its insides: the
// subsystems a whole node built, and the few rules they check directly.

var (
	PortOf        = portOf
	PublishedMark = publishedMark
	OpenFiles     = fdlimit.Open
	OpenFileLimit = fdlimit.Limit
	NewMetrics    = newMetrics
	CertStorage   = certStorage
)

const (
	MinConns        = httpapi.MinConns
	MaxDerivedConns = httpapi.MaxDerivedConns
	DrainBudget     = drainBudget
)

type (
	MetricProbes = metricProbes
)

func (s *Server) Cfg() *Config                           { return s.cfg }
func (s *Server) St() store.Store                        { return s.st }
func (s *Server) Identity() *store.Identity              { return s.identity }
func (s *Server) Pub() *publish.Publisher                { return s.pub }
func (s *Server) Rec() *reconcile.Reconciler             { return s.rec }
func (s *Server) Self() *self.Record                     { return s.self }
func (s *Server) Ingresses() *ingress.Book               { return s.ingresses }
func (s *Server) Instances() *fleetwrite.Registry        { return s.instances }
func (s *Server) Probes() *probe.Prober                  { return s.probes }
func (s *Server) Certs() *fleetcerts.Manager             { return s.certs }
func (s *Server) Metrics() *metrics                      { return s.metrics }
func (m *metrics) Reg() *prometheus.Registry             { return m.reg }
func (m *metrics) StoreRequests() *prometheus.CounterVec { return m.storeRequests }

// HealthCheckInterval is the render's interval setting for traefik.healthCheck.interval d.
func HealthCheckInterval(d ptypes.Duration) string {
	return HealthCheckConfig{Interval: d}.RenderInterval()
}
