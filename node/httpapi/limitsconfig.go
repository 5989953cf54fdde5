package httpapi

// The limits.* settings: what the guards of limits.go enforce, their defaults, checks
// and derived values.

import (
	"fmt"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/internal/fdlimit"
)

// LimitsConfig bounds what clients can hold (docs/design.md §5, "Hostile clients"). The node
// API may face the internet: a connection that sends headers and never its body, or
// never finishes its headers, or never reads its answer, is cut after a bounded time,
// and connections beyond a cap are refused, with a reserve kept for ingress polls and
// probes.
type LimitsConfig struct {
	MaxConns      int             `description:"Most concurrent connections on the API listener; beyond it new connections are refused with 503 (0: derived from the open-file limit, 3/4 of it, at most 4096)." json:"maxConns,omitempty"`
	ReservedConns int             `description:"Of maxConns, how many are kept for ingress polls and status (ingress or admin token) and health probes: a connection accepted beyond maxConns - reservedConns serves one such request and closes (0: maxConns/8)." json:"reservedConns,omitempty"`
	HeaderTimeout ptypes.Duration `description:"Time a client has to send a request's headers." json:"headerTimeout,omitempty"`
	BodyTimeout   ptypes.Duration `description:"Time a client has to send a request's body, counted from the end of its headers (requests without a body, such as long-polls, are not bounded by it)." json:"bodyTimeout,omitempty"`
	WriteTimeout  ptypes.Duration `description:"Time a client has to take an answer (a long-poll's wait is not counted)." json:"writeTimeout,omitempty"`
	IdleTimeout   ptypes.Duration `description:"A keep-alive connection idle this long is closed." json:"idleTimeout,omitempty"`
	RejectLog     ptypes.Duration `description:"Rejected requests are logged at most once per remote address per this interval, with the count of those not logged." json:"rejectLog,omitempty"`
	// MaxConnsPerSource and ConnMaxAge: one client cannot hold the general connections
	// with idle keep-alives (issue 25 item 6).
	MaxConnsPerSource int             `description:"Most general connections one remote address (an IPv6 address: its /64) holds at once; a further connection from it is served like a reserved one (one ingress poll, status or health probe, or any request with the ingress or admin token, then closed; anything else 503) (0: a quarter of the general connections, at least 16)." json:"maxConnsPerSource,omitempty"`
	ConnMaxAge        ptypes.Duration `description:"A connection older than this is closed after its next answer (Connection: close), however busy: a keep-alive cannot hold a slot for as long as its client likes." json:"connMaxAge,omitempty"`
}

// Bounds of the derived connection cap (LimitsConfig.Conns).
const (
	MaxDerivedConns = 4096
	MinConns        = 16
)

// DefaultLimits are the limits.* defaults.
func DefaultLimits() LimitsConfig {
	return LimitsConfig{
		HeaderTimeout: ptypes.Duration(5 * time.Second),
		BodyTimeout:   ptypes.Duration(10 * time.Second),
		WriteTimeout:  ptypes.Duration(60 * time.Second),
		IdleTimeout:   ptypes.Duration(30 * time.Second),
		RejectLog:     ptypes.Duration(10 * time.Second),
		ConnMaxAge:    ptypes.Duration(5 * time.Minute),
	}
}

// Validate lists what is wrong with l (nil when it is valid). It reports and changes
// nothing.
func (l LimitsConfig) Validate() []error {
	var errs []error
	if l.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("limits.maxConns %d: must be 0 (derived) or positive", l.MaxConns))
	} else if l.MaxConns > 0 && l.MaxConns < 2 {
		errs = append(errs, fmt.Errorf("limits.maxConns %d: at least 2 (one general connection, one reserved)", l.MaxConns))
	}
	if l.MaxConnsPerSource < 0 {
		errs = append(errs, fmt.Errorf("limits.maxConnsPerSource %d: must be 0 (derived) or positive", l.MaxConnsPerSource))
	}
	if l.ReservedConns < 0 {
		errs = append(errs, fmt.Errorf("limits.reservedConns %d: must be 0 (maxConns/8) or positive", l.ReservedConns))
	} else if l.MaxConns > 0 && l.ReservedConns >= l.MaxConns {
		errs = append(errs, fmt.Errorf("limits.reservedConns %d: must be below limits.maxConns %d", l.ReservedConns, l.MaxConns))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"limits.headerTimeout", time.Duration(l.HeaderTimeout)},
		{"limits.bodyTimeout", time.Duration(l.BodyTimeout)},
		{"limits.writeTimeout", time.Duration(l.WriteTimeout)},
		{"limits.idleTimeout", time.Duration(l.IdleTimeout)},
		{"limits.rejectLog", time.Duration(l.RejectLog)},
		{"limits.connMaxAge", time.Duration(l.ConnMaxAge)},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", d.name))
		}
	}
	return errs
}

// FillDefaults sets every zero timeout to its default, for a configuration built
// without its defaults (a zero body timeout would cut every body at once).
func (l *LimitsConfig) FillDefaults() {
	def := DefaultLimits()
	for _, p := range []struct{ v, d *ptypes.Duration }{
		{&l.HeaderTimeout, &def.HeaderTimeout}, {&l.BodyTimeout, &def.BodyTimeout},
		{&l.WriteTimeout, &def.WriteTimeout}, {&l.IdleTimeout, &def.IdleTimeout},
		{&l.RejectLog, &def.RejectLog}, {&l.ConnMaxAge, &def.ConnMaxAge},
	} {
		if *p.v <= 0 {
			*p.v = *p.d
		}
	}
}

// Conns is the connection cap and its reserve, deriving what is left at 0 (the cap
// from the open-file limit, at read time).
func (l LimitsConfig) Conns() (total, reserved int) {
	total = l.MaxConns
	if total == 0 {
		total = MaxDerivedConns
		// What is left of the open-file limit once the files the process already holds
		// (the store, logs, listeners; a test binary holds many) are counted.
		if files := fdlimit.Limit() - fdlimit.Open(); files > 0 {
			total = min(total, max(MinConns, files-max(64, files/4)))
		}
	}
	reserved = l.ReservedConns
	if reserved == 0 {
		reserved = max(1, total/8)
	}
	reserved = min(reserved, total-1)
	return total, reserved
}

// PerSource is the general connections one remote address may hold.
func (l LimitsConfig) PerSource(general int) int {
	if l.MaxConnsPerSource > 0 {
		return l.MaxConnsPerSource
	}
	return max(16, general/4)
}
