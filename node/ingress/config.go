package ingress

import (
	"fmt"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// Config bounds the book (the node's ingresses.* settings).
type Config struct {
	LostAfter   ptypes.Duration `description:"An ingress not heard from for this long is reported lost (and no longer waited for by wait=applied)." json:"lostAfter,omitempty"`
	ForgetAfter ptypes.Duration `description:"An ingress not heard from for this long is forgotten (its report deleted from the store)." json:"forgetAfter,omitempty"`
	MaxTracked  int             `description:"Most ingress names this node tracks at once (reports under new names beyond are refused; the polls are served)." json:"maxTracked,omitempty"`
}

// Defaults are the ingresses.* defaults.
func Defaults() Config {
	return Config{LostAfter: ptypes.Duration(60 * time.Second), ForgetAfter: ptypes.Duration(24 * time.Hour), MaxTracked: 256}
}

// Validate lists what is wrong with c (nil when it is valid); it changes nothing.
func (c Config) Validate() []error {
	var errs []error
	if c.LostAfter < ptypes.Duration(2*time.Second) {
		errs = append(errs, fmt.Errorf("ingresses.lostAfter %s: at least 2s (an ingress is heard from at every poll; a long-poll counts while it is held)", time.Duration(c.LostAfter)))
	}
	if c.ForgetAfter <= c.LostAfter {
		errs = append(errs, fmt.Errorf("ingresses.forgetAfter %s: must be longer than ingresses.lostAfter %s", time.Duration(c.ForgetAfter), time.Duration(c.LostAfter)))
	}
	if c.MaxTracked < 1 || c.MaxTracked > MaxObjects {
		errs = append(errs, fmt.Errorf("ingresses.maxTracked %d: 1..%d", c.MaxTracked, MaxObjects))
	}
	return errs
}
