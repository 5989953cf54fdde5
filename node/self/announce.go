package self

import (
	"context"
	"sync"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// announcements tracks which of this node's instance changes its record has announced,
// and under which store serial, so that an instance write can wait until it is live
// (?wait=applied on /v1/node/instances, docs/design.md §13).
//
// An instance write changes the registry, then calls changed (a generation counter moves).
// Record.Write reads the generation *before* it reads the registry, so the record it
// writes holds every change up to that generation; once the record is in the store and
// its content announced (the bump that names it, or an earlier bump of the same content)
// it calls done(gen, serial). A waiter takes the generation after its write and waits
// until a generation at least as new is announced; the serial it gets is the one every
// ingress must hold.
type announcements struct {
	mu      sync.Mutex
	gen     uint64                    // the registry's change counter
	doneGen uint64                    // the newest generation the record announced
	serial  uint64                    // the serial that announced doneGen's content
	insts   map[string]fleet.Instance // the instances that record published (readiness after the probes)
	failed  string                    // the last failure to write or announce the record ("" after a success)
	moved   chan struct{}             // closed and replaced when doneGen moves or a failure is noted
}

func newAnnouncements() *announcements {
	return &announcements{moved: make(chan struct{})}
}

// changed notes a change of this node's instances and returns its generation.
func (a *announcements) changed() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	return a.gen
}

// current is the generation a record written now would carry.
func (a *announcements) current() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gen
}

// done notes that the record holding every change up to gen is announced at serial.
func (a *announcements) done(gen, serial uint64, insts map[string]fleet.Instance) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen >= a.doneGen {
		a.doneGen, a.serial, a.insts = gen, serial, insts
	}
	a.failed = ""
	close(a.moved)
	a.moved = make(chan struct{})
}

// fail notes that writing or announcing the record failed (why, for a waiter's answer).
func (a *announcements) fail(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed = why
	close(a.moved)
	a.moved = make(chan struct{})
}

// await waits until generation gen is announced in a record that shows what the
// write asked for (want: the instances published, then "" or why not yet; a record that
// names the instance down while it is declared ready is waited past, for the probe) and
// returns its serial. ok is false at the deadline or when ctx ends; why then says what
// the record is waiting for.
func (a *announcements) await(ctx context.Context, gen uint64, deadline time.Time, want func(map[string]fleet.Instance) string) (serial uint64, ok bool, why string) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		a.mu.Lock()
		doneGen, s, insts, failed, moved := a.doneGen, a.serial, a.insts, a.failed, a.moved
		a.mu.Unlock()
		notYet := ""
		if doneGen >= gen {
			if notYet = want(insts); notYet == "" {
				return s, true, ""
			}
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return 0, false, "the request ended"
		case <-t.C:
			why = "this node has not announced the instance change in its record yet"
			if notYet != "" {
				why = notYet
			}
			if failed != "" {
				why += " (writing its record: " + failed + ")"
			}
			return 0, false, why
		}
	}
}
