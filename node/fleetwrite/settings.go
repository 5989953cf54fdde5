package fleetwrite

import (
	"fmt"
	"math"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// The node's settings of what this package owns: instance ports (ports.*), the limits
// on writes (writes.*) and the audit log (audit.*), each with its defaults and a
// Validate that reports and changes nothing.

// PortsConfig bounds instance port allocation.
type PortsConfig struct {
	Min        int             `description:"Lowest allocatable port." json:"min,omitempty"`
	Max        int             `description:"Highest allocatable port." json:"max,omitempty"`
	Quarantine ptypes.Duration `description:"How long a released port is not reassigned." json:"quarantine,omitempty"`
}

// DefaultPorts are the ports.* defaults.
func DefaultPorts() PortsConfig {
	return PortsConfig{Min: 24000, Max: 28999, Quarantine: ptypes.Duration(10 * time.Minute)}
}

// Validate lists what is wrong with the range (the quarantine's floor depends on
// reconcile.interval: the node checks it).
func (c PortsConfig) Validate() []error {
	if c.Min <= 0 || c.Max > 65535 || c.Min > c.Max {
		return []error{fmt.Errorf("ports.min/ports.max: invalid range %d..%d", c.Min, c.Max)}
	}
	return nil
}

// WritesConfig rate-limits writes per application token (the admin is not limited).
//
// RouteBurst and RoutePerMinute are each account's fleet-wide budget of routing changes
// (a ready instance's port or readiness, a path map; docs/security.md): every change
// reloads every Traefik of the fleet, and Rate is per token per node. The defaults, 60
// at once and 6 a minute: a 10-placement application's first rollout costs 10 (one
// instance made ready per node), a deploy 10 (one move within the port pair per node)
// or 20 with a drain (not ready, then the move), so a first rollout, a deploy and its
// rollback, both drained, pass at once (50); a spent budget is whole again in 10
// minutes, and a tenant past it reloads the fleet at most once every 10 s.
type WritesConfig struct {
	Rate  float64 `description:"Writes per second one application token may sustain (429 beyond)." json:"rate,omitempty"`
	Burst int     `description:"Writes one application token may make at once." json:"burst,omitempty"`
	// RouteBurst is the routing changes one account may make at once, fleet-wide.
	RouteBurst int `description:"Routing changes (ready instance port or readiness, path maps) one account may make at once, fleet-wide (429 beyond; the admin is exempt)." json:"routeBurst,omitempty"`
	// RoutePerMinute refills an account's routing changes.
	RoutePerMinute float64 `description:"Routing changes a minute one account may sustain, fleet-wide." json:"routePerMinute,omitempty"`
}

// DefaultWrites are the writes.* defaults.
func DefaultWrites() WritesConfig {
	return WritesConfig{Rate: 5, Burst: 20, RouteBurst: 60, RoutePerMinute: 6}
}

// Validate lists what is wrong with c.
func (c WritesConfig) Validate() []error {
	var errs []error
	if c.Rate <= 0 || c.Burst < 1 {
		errs = append(errs, fmt.Errorf("writes.rate %v, writes.burst %d: both must be positive", c.Rate, c.Burst))
	}
	if c.RouteBurst < 1 || !(c.RoutePerMinute > 0) {
		errs = append(errs, fmt.Errorf("writes.routeBurst %d, writes.routePerMinute %v: both must be positive", c.RouteBurst, c.RoutePerMinute))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"writes.rate", c.Rate}, {"writes.routePerMinute", c.RoutePerMinute}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("%s %v: must be a finite number", f.name, f.v))
		}
	}
	return errs
}

// RouteBudget is the routing-change budget c sets.
func (c WritesConfig) RouteBudget() RouteBudget {
	return RouteBudget{Burst: c.RouteBurst, PerMinute: c.RoutePerMinute}
}

// AuditConfig bounds the audit log.
type AuditConfig struct {
	Retention ptypes.Duration `description:"Audit records older than this are deleted (daily sweep)." json:"retention,omitempty"`
}

// DefaultAudit are the audit.* defaults.
func DefaultAudit() AuditConfig {
	return AuditConfig{Retention: ptypes.Duration(30 * 24 * time.Hour)}
}

// Validate lists what is wrong with c.
func (c AuditConfig) Validate() []error {
	if c.Retention < ptypes.Duration(time.Hour) {
		return []error{fmt.Errorf("audit.retention %s: at least 1h", time.Duration(c.Retention))}
	}
	return nil
}
