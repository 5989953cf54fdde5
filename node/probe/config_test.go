package probe

import (
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// TestConfigIntervalFloor: probe.interval is 0 (off) or at least 10ms; the floor itself
// passes, and Validate changes nothing.
func TestConfigIntervalFloor(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		sub      string
	}{
		{0, ""},
		{10 * time.Millisecond, ""},
		{time.Second, ""},
		{time.Millisecond, "probe.interval 1ms: at least 10ms"},
		{9 * time.Millisecond, "probe.interval 9ms: at least 10ms"},
	} {
		c := Defaults()
		c.Interval = ptypes.Duration(tc.interval)
		before := c
		errs := c.Validate()
		switch {
		case tc.sub == "" && len(errs) != 0:
			t.Errorf("interval %s: %v", tc.interval, errs)
		case tc.sub != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.sub)):
			t.Errorf("interval %s: %v, want one error containing %q", tc.interval, errs, tc.sub)
		}
		if c != before {
			t.Errorf("Validate changed %+v to %+v", before, c)
		}
	}
}

// TestConfigIntervalFloorHidesNoOtherRefusal: an interval under the floor is refused
// beside what else is wrong with the section (a timeout longer than the interval, a
// negative one), all at once, as when the floor was the root's check.
func TestConfigIntervalFloorHidesNoOtherRefusal(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, -time.Second} {
		c := Defaults()
		c.Interval, c.Timeout = ptypes.Duration(5*time.Millisecond), ptypes.Duration(timeout)
		var msgs []string
		for _, err := range c.Validate() {
			msgs = append(msgs, err.Error())
		}
		all := strings.Join(msgs, "\n")
		for _, sub := range []string{"probe.interval 5ms: at least 10ms", "probe.timeout " + timeout.String() + ": must be at most probe.interval 5ms"} {
			if !strings.Contains(all, sub) {
				t.Errorf("timeout %s: errors %q, want one containing %q", timeout, all, sub)
			}
		}
	}
}
