package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// sample is one request of a steady request loop.
type sample struct {
	at   time.Time // when the request was sent
	from string    // echo name, or "traefik:<status>", or "error: …"
	ok   bool      // 2xx from an upstream
}

// requestLoop sends GET host+path through a Traefik, one request at a time, every
// `every`, until stopped, and records every answer.
type requestLoop struct {
	mu      sync.Mutex
	samples []sample
	stop    func()
}

func startLoop(t *testing.T, tr *traefik, host, path string, every time.Duration) *requestLoop {
	t.Helper()
	l := &requestLoop{}
	l.stop = repeat(t, every, func() {
		s := sample{at: time.Now()}
		if r, err := tr.get(host, path); err != nil {
			s.from = "error: " + err.Error()
		} else {
			s.from, s.ok = r.from(), r.echo != nil && r.status/100 == 2
		}
		l.mu.Lock()
		l.samples = append(l.samples, s)
		l.mu.Unlock()
	})
	return l
}

func (l *requestLoop) since(t0 time.Time) []sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sample
	for _, s := range l.samples {
		if !s.at.Before(t0) {
			out = append(out, s)
		}
	}
	return out
}

// notFrom returns how many requests were sent from t0 on, and what each of them that was
// not a 2xx from want got instead.
func (l *requestLoop) notFrom(t0 time.Time, want string) (sent int, failures []string) {
	ss := l.since(t0)
	for _, s := range ss {
		if !s.ok || s.from != want {
			failures = append(failures, s.from)
		}
	}
	return len(ss), failures
}

// switchResult is what one switch (kill, restart, flip) cost the request loop.
type switchResult struct {
	failed   int           // requests that got no 2xx from an upstream
	stale    int           // successful requests still served by someone else
	latency  time.Duration // t0 → first request served by the new target
	failures []string      // what the failed requests got
}

// waitSwitch waits until, after t0, `settle` consecutive requests were served by want,
// and returns what happened in between.
func (l *requestLoop) waitSwitch(t *testing.T, t0 time.Time, want string, settle int, timeout time.Duration) switchResult {
	t.Helper()
	var res switchResult
	err := poll(timeout, 10*time.Millisecond, func() error {
		ss := l.since(t0)
		res = switchResult{}
		run, first := 0, time.Time{}
		for _, s := range ss {
			switch {
			case s.from == want && s.ok:
				if first.IsZero() {
					first = s.at
				}
				run++
			case !s.ok:
				res.failed++
				res.failures = append(res.failures, s.from)
				run = 0
			default:
				res.stale++
				run = 0
			}
			if run >= settle {
				res.latency = first.Sub(t0)
				return nil
			}
		}
		last := "nothing yet"
		if len(ss) > 0 {
			last = ss[len(ss)-1].from
		}
		return fmt.Errorf("%d requests since the switch, last served by %s", len(ss), last)
	})
	if err != nil {
		t.Fatalf("waiting %s for the loop to settle on %s: %v", timeout, want, err)
	}
	return res
}
