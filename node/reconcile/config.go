package reconcile

import (
	"errors"
	"fmt"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// MinInterval is the shortest reconcile.interval: a shorter one reads the store's
// serial more than a hundred times a second per node.
const MinInterval = 10 * time.Millisecond

// Config times the reconcile loop (the node's reconcile.* settings).
type Config struct {
	Interval     ptypes.Duration `description:"How often the store serial is checked." json:"interval,omitempty"`
	FullInterval ptypes.Duration `description:"How often every object is re-read regardless." json:"fullInterval,omitempty"`
	Heartbeat    ptypes.Duration `description:"How often this node rewrites its own record." json:"heartbeat,omitempty"`
	NodeTTL      ptypes.Duration `description:"Node records older than this, or dated further ahead of this node's clock, are stale." json:"nodeTTL,omitempty"`
	// PublishWindow bounds how often a burst of changes republishes (each publish
	// reloads every Traefik); a change after a quiet spell publishes at once.
	PublishWindow ptypes.Duration `description:"At most one publish per window during a burst of changes (a lone change publishes at once)." json:"publishWindow,omitempty"`
}

// Defaults are the reconcile.* defaults.
func Defaults() Config {
	return Config{
		Interval:      ptypes.Duration(2 * time.Second),
		FullInterval:  ptypes.Duration(time.Hour),
		Heartbeat:     ptypes.Duration(15 * time.Second),
		NodeTTL:       ptypes.Duration(60 * time.Second),
		PublishWindow: ptypes.Duration(250 * time.Millisecond),
	}
}

// Validate lists what is wrong with c (nil when it is valid); it changes nothing.
func (c Config) Validate() []error {
	var errs []error
	if c.PublishWindow < 0 {
		errs = append(errs, errors.New("reconcile.publishWindow: must not be negative"))
	}
	if c.Interval <= 0 {
		errs = append(errs, errors.New("reconcile.interval: must be positive"))
	} else if iv := time.Duration(c.Interval); iv < MinInterval {
		errs = append(errs, fmt.Errorf("reconcile.interval %s: at least %s", iv, MinInterval))
	}
	if c.FullInterval <= 0 {
		errs = append(errs, errors.New("reconcile.fullInterval: must be positive"))
	}
	if c.Heartbeat <= 0 {
		errs = append(errs, errors.New("reconcile.heartbeat: must be positive"))
	}
	// A TTL at or below the heartbeat makes live nodes flap stale, and every flap is a
	// new revision: a full reload on every ingress.
	if c.NodeTTL <= c.Heartbeat {
		errs = append(errs, fmt.Errorf("reconcile.nodeTTL %s: must be longer than reconcile.heartbeat %s (4x is typical)",
			time.Duration(c.NodeTTL), time.Duration(c.Heartbeat)))
	}
	return errs
}
