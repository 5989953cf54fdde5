package probe

import (
	"fmt"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// Config times the probes of this node's own instances (the node's probe.* settings).
// The readiness a node publishes for an instance is its declared readiness AND its
// probe's verdict.
type Config struct {
	Interval    ptypes.Duration `description:"How often each of this node's instances is probed (TCP connect to node.address:port, or GET of the app's health.path); 0 disables probing (declared readiness alone is published)." json:"interval,omitempty"`
	Timeout     ptypes.Duration `description:"Time one probe may take (connect, and for a health path the response headers); at most probe.interval; 0 (default): half of probe.interval." json:"timeout,omitempty"`
	DownAfter   int             `description:"Consecutive failed probes that mark an instance down (out of the routing document)." json:"downAfter,omitempty"`
	UpAfter     int             `description:"Consecutive successful probes that mark a down instance up again." json:"upAfter,omitempty"`
	Concurrency int             `description:"Most probes in flight at once (sockets the prober holds); a quarter of them is kept for instances whose last probe timed out." json:"concurrency,omitempty"`
	// Flap damping (probe.go): an instance that comes back up flapUps times within
	// flapWindow is held down (not published up) for holdDown, doubling per further
	// flap up to holdDownMax. Going down is never delayed.
	FlapWindow  ptypes.Duration `description:"Window in which an instance's recoveries (down to up) are counted for flap damping; the hold-down also halves for every flapWindow without a recovery; 0 disables damping." json:"flapWindow,omitempty"`
	FlapUps     int             `description:"Recoveries within probe.flapWindow from which an instance coming back up is held down (at least 2: a lone death and recovery is never delayed)." json:"flapUps,omitempty"`
	HoldDown    ptypes.Duration `description:"First hold-down of a flapping instance (kept out of the record although its probes pass); doubled for every further recovery while it flaps." json:"holdDown,omitempty"`
	HoldDownMax ptypes.Duration `description:"Longest hold-down of a flapping instance." json:"holdDownMax,omitempty"`
}

// minInterval: a shorter probe.interval probes every instance more than a hundred times
// a second.
const minInterval = 10 * time.Millisecond

// Defaults are the probe.* defaults.
func Defaults() Config {
	return Config{Interval: ptypes.Duration(time.Second), DownAfter: 2, UpAfter: 2, Concurrency: 32, // Timeout 0: interval/2
		FlapWindow: ptypes.Duration(time.Minute), FlapUps: 3, HoldDown: ptypes.Duration(10 * time.Second), HoldDownMax: ptypes.Duration(5 * time.Minute)}
}

// EffectiveTimeout is the probe timeout in force (0: half the interval).
func (p Config) EffectiveTimeout() time.Duration {
	if p.Timeout == 0 {
		return time.Duration(p.Interval) / 2
	}
	return time.Duration(p.Timeout)
}

// Validate lists what is wrong with p (nil when it is valid).
func (p Config) Validate() []error {
	var errs []error
	switch {
	case p.Interval < 0:
		errs = append(errs, fmt.Errorf("probe.interval %s: must not be negative (0 disables probing)", time.Duration(p.Interval)))
	case p.Interval == 0:
		return nil // disabled: the rest is not used
	case p.Timeout < 0 || p.Timeout > p.Interval:
		errs = append(errs, fmt.Errorf("probe.timeout %s: must be at most probe.interval %s (0: half of it)",
			time.Duration(p.Timeout), time.Duration(p.Interval)))
	}
	// Beside the switch, not a case of it: an interval under the floor hides no other
	// refusal (TestConfigIntervalFloorHidesNoOtherRefusal).
	if p.Interval > 0 && p.Interval < ptypes.Duration(minInterval) {
		errs = append(errs, fmt.Errorf("probe.interval %s: at least %s (0 disables probing)", time.Duration(p.Interval), minInterval))
	}
	if p.DownAfter < 1 || p.UpAfter < 1 {
		errs = append(errs, fmt.Errorf("probe.downAfter %d, probe.upAfter %d: both must be at least 1", p.DownAfter, p.UpAfter))
	}
	if p.Concurrency < 2 || p.Concurrency > 1024 {
		errs = append(errs, fmt.Errorf("probe.concurrency %d: must be 2..1024 (a quarter, at least one, is kept for instances whose last probe timed out)", p.Concurrency))
	}
	switch {
	case p.FlapWindow < 0:
		errs = append(errs, fmt.Errorf("probe.flapWindow %s: must not be negative (0 disables flap damping)", time.Duration(p.FlapWindow)))
	case p.FlapWindow == 0:
	case p.FlapUps < 2:
		errs = append(errs, fmt.Errorf("probe.flapUps %d: must be at least 2 (a lone death and recovery is never held down)", p.FlapUps))
	case p.HoldDown <= 0 || p.HoldDownMax < p.HoldDown:
		errs = append(errs, fmt.Errorf("probe.holdDown %s, probe.holdDownMax %s: holdDown must be positive and at most holdDownMax",
			time.Duration(p.HoldDown), time.Duration(p.HoldDownMax)))
	}
	return errs
}
