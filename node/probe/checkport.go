package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"syscall"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// Checker checks one port of this node once, as the prober checks an instance (a GET of
// the application's health path, 2xx or 3xx, or else a TCP connect), dialling only
// node.address and bounded by its timeout. It is the instance move's check: before an
// instance is moved to a new port, that port must already serve (fleetwrite's
// PortChecker; docs/api.md, "Instances"). It keeps no state: it works with probing
// off (probe.interval 0) as well.
type Checker struct {
	p       *Prober
	timeout time.Duration
}

// NewChecker builds a checker of addr's ports, each check bounded by timeout.
func NewChecker(addr netip.Addr, timeout time.Duration, log *slog.Logger) *Checker {
	cfg := Config{Interval: ptypes.Duration(2 * timeout), Timeout: ptypes.Duration(timeout), Concurrency: 4}
	return &Checker{p: newProber(cfg, addr, log), timeout: timeout}
}

// CheckPort checks port once: nil when it serves (healthPath answers 2xx or 3xx, or, with
// no health path, a TCP connect succeeds), else an error saying what failed, in words
// for the operator ("nothing listens on 10.0.0.3:24001 (connection refused)").
func (c *Checker) CheckPort(ctx context.Context, port int, healthPath string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.p.check(ctx, probeTarget{port: port, path: healthPath})
	if err == nil {
		return nil
	}
	addr := netip.AddrPortFrom(c.p.addr, uint16(port)).String()
	why := probeErrText(err)
	if why == "timeout" {
		why = "no answer within " + c.timeout.String()
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing listens on %s (connection refused)", addr)
	case healthPath == "":
		return fmt.Errorf("a TCP connect to %s failed: %s", addr, why)
	default:
		return fmt.Errorf("GET http://%s%s failed: %s", addr, healthPath, why)
	}
}
