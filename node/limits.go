package node

// The connection and request limits of the API (limits.*): their defaults and derived
// values. The guards themselves are node/httpapi's (limits.go there).

import (
	"fmt"
	"os"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// Bounds of the derived connection cap.
const (
	maxDerivedConns = 4096
	minConns        = 16
)

func (l LimitsConfig) validate() []error {
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

// fillDefaults sets every zero timeout to its default, for a Config built without
// SetDefaults (a zero body timeout would cut every body at once).
func (l *LimitsConfig) fillDefaults() {
	def := NewConfig().Limits
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

// conns is the connection cap and its reserve, deriving what is left at 0.
func (l LimitsConfig) conns() (total, reserved int) {
	total = l.MaxConns
	if total == 0 {
		total = maxDerivedConns
		// What is left of the open-file limit once the files the process already holds
		// (the store, logs, listeners; a test binary holds many) are counted.
		if files := openFileLimit() - openFiles(); files > 0 {
			total = min(total, max(minConns, files-max(64, files/4)))
		}
	}
	reserved = l.ReservedConns
	if reserved == 0 {
		reserved = max(1, total/8)
	}
	reserved = min(reserved, total-1)
	return total, reserved
}

// perSource is the general connections one remote address may hold.
func (l LimitsConfig) perSource(general int) int {
	if l.MaxConnsPerSource > 0 {
		return l.MaxConnsPerSource
	}
	return max(16, general/4)
}

// openFiles counts the files this process holds now (0 where /proc is not there).
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
