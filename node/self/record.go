// Package self is the node's own record (nodes/<name>.json): the heartbeat that
// rewrites it, the guards that one name is one node (name.go) and one address one node
// (address.go), the node and boot ids it carries, and the announcements of its instance
// changes that ?wait=applied on an instance write waits for (announce.go).
package self

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// passTimeout bounds one write of the record, or the start check, so a hung store
// cannot stall shutdown (the reconcile pass's bound).
const passTimeout = 20 * time.Second

// Options is what the record is built from.
type Options struct {
	Store    store.Store
	Identity *store.Identity
	Log      *slog.Logger
	// NodeID is the node's instance id (LoadOrMintNodeID).
	NodeID string
	// Name, Address and APIPort are the node's (APIPort: the port its API is reached on).
	Name    string
	Address string
	APIPort int
	// NodeTTL: a record not rewritten for this long is stale.
	NodeTTL time.Duration
	// Settings are the fleet settings the record carries.
	Settings func() fleet.NodeSettings
	// Instances are the instances the record publishes: declared and probe up.
	Instances func() map[string]fleet.Instance
	// OnAnnounced runs after a serial bump announced a new content of the record.
	OnAnnounced func()
	// SweepOrphans (nil: none) releases this node's instances of deleted or recreated
	// applications; Heartbeat runs it before each write, so the record never publishes
	// them.
	SweepOrphans func(ctx context.Context)
	// LastRecord (nil: none) is told, once, the instances of this node's record as this
	// process first read it, before its first write of it (nil: absent or malformed):
	// the ports peers may still route to by it (fleetwrite.Registry.HoldLastRecord). A
	// failure is retried at the next read.
	LastRecord func(map[string]fleet.Instance) error
	// Peers (nil: none) is the last reconcile pass's view of the fleet's node records,
	// checked by Heartbeat against this node's address after each write (address.go).
	Peers func() []fleet.NodeRecord
}

// Record is this node's own record and what the node knows of it.
type Record struct {
	o Options
	// bootID is minted per process; started is when Start ran (the record of an
	// earlier run is not a duplicate).
	bootID  string
	nodeID  string
	started time.Time
	name    nameGuard
	address addressGuard
	// heartbeatErr is the last failure to write the record (nil after a success), and
	// since when writes have been failing.
	heartbeatErr atomic.Pointer[heartbeatFailure]
	// announced is the record, `seen` left out, as of the last serial bump that named
	// it ("" before one); only the heartbeat (Write) touches it. announcedSerial is
	// the serial of that bump.
	announced       string
	announcedSerial uint64
	// announce tracks which instance changes the record has announced.
	announce *announcements
	// lastRead: LastRecord was told (only the start check and the heartbeat touch it,
	// one after the other).
	lastRead bool
}

// New builds the record; nothing is read or written until Start and Write.
func New(o Options) *Record {
	return &Record{o: o, nodeID: o.NodeID, bootID: randomHex(8), started: time.Now(), announce: newAnnouncements()}
}

// Start notes the process start and refuses to start when another installation holds
// this node's name (name.go) or another live node its address (address.go); call it
// once, before serving.
func (s *Record) Start(ctx context.Context) error {
	s.started = time.Now()
	if err := s.checkName(ctx); err != nil {
		return err
	}
	return s.checkAddress(ctx)
}

// heartbeatFailure is the last failure to write the record, and since when writes
// have failed without a success between.
type heartbeatFailure struct {
	text  string
	since time.Time
}

// Err is the last failure to write the record (nil after a success).
func (s *Record) Err() *string {
	if f := s.heartbeatErr.Load(); f != nil {
		return &f.text
	}
	return nil
}

// FailingSince is when the record's writes began to fail (zero while they succeed).
func (s *Record) FailingSince() time.Time {
	if f := s.heartbeatErr.Load(); f != nil {
		return f.since
	}
	return time.Time{}
}

// Changed notes a change of this node's instances (a new generation for waiters).
func (s *Record) Changed() uint64 { return s.announce.changed() }

// Generation is the generation a record written now would carry.
func (s *Record) Generation() uint64 { return s.announce.current() }

// Await waits until generation gen is announced in a record that shows what want asks
// for, and returns its serial (see announcements.await).
func (s *Record) Await(ctx context.Context, gen uint64, deadline time.Time, want func(map[string]fleet.Instance) string) (serial uint64, ok bool, why string) {
	return s.announce.await(ctx, gen, deadline, want)
}

// Announced is app's instance as the last announced record published it.
func (s *Record) Announced(app string) (fleet.Instance, bool) {
	a := s.announce
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.insts[app]
	return i, ok
}

// Heartbeat is one step of the heartbeat at now (the node schedules it every
// reconcile.heartbeat, and at once when this node's instances change): the orphan sweep,
// the record's write (Write), then the address check against the last pass's view of
// the fleet (ObserveFleet). ctx bounds the store requests.
func (s *Record) Heartbeat(ctx context.Context, now time.Time) {
	if s.o.SweepOrphans != nil {
		s.o.SweepOrphans(ctx)
	}
	s.write(ctx, now)
	if s.o.Peers != nil {
		s.ObserveFleet(s.o.Peers(), now)
	}
}

// Write writes nodes/<name>.json (this node is its only writer: a write by
// anyone else in between is noticed and reported, see putOwnRecord). It bumps the
// serial, naming the record, only when something but its `seen` time changed since the
// last announced version (instances, address, settings, boot), or when peers may hold
// another version: a heartbeat alone costs peers nothing but their periodic LIST of
// nodes/ (liveness, see node/reconcile). The record is seen now (time.Now).
func (s *Record) Write(ctx context.Context) { s.write(ctx, time.Now()) }

func (s *Record) write(ctx context.Context, now time.Time) {
	if s.o.Identity.Foreign() {
		// Never into a store this node does not recognise (a wrong bucket is another
		// fleet's); the record is written as soon as the store is accepted.
		s.o.Log.Debug("not writing own node record: the store is foreign", "reason", s.o.Identity.ForeignReason())
		s.announce.fail("the store is foreign: " + s.o.Identity.ForeignReason())
		return
	}
	gen := s.announce.current() // before the registry is read: the record holds every change up to gen
	set := s.o.Settings()
	rec := fleet.NodeRecord{
		Name:      s.o.Name,
		Address:   s.o.Address,
		APIPort:   s.o.APIPort,
		Instances: s.o.Instances(), // declared AND probe up
		Seen:      now.UTC().Truncate(time.Millisecond),
		Settings:  &set,
		Boot:      s.boot(),
	}
	body, err := jsonx.Marshal(rec)
	unseen := rec
	unseen.Seen = time.Time{}
	content, _ := jsonx.Marshal(unseen)
	key := fleet.NodeKey(rec.Name)
	replaced := false
	if err == nil {
		replaced, err = s.putOwnRecord(ctx, key, body)
	}
	bump := err == nil && (replaced || string(content) != s.announced)
	if bump {
		s.announced = "" // until the bump succeeds
		var n uint64
		if n, err = s.o.Identity.Bump(ctx, s.o.Store, key); err == nil {
			s.announced, s.announcedSerial = string(content), n
		}
	}
	if err == nil {
		s.heartbeatErr.Store(nil)
	} else {
		since := now
		if prev := s.heartbeatErr.Load(); prev != nil {
			since = prev.since
		}
		s.heartbeatErr.Store(&heartbeatFailure{text: err.Error(), since: since})
	}
	if err != nil {
		s.announce.fail(err.Error())
		if ctx.Err() == nil {
			s.o.Log.Warn("writing own node record", "err", err)
		}
		return
	}
	// The content is announced: by this bump, or by the earlier one of the same content.
	s.announce.done(gen, s.announcedSerial, rec.Instances)
	if bump {
		s.o.OnAnnounced()
	}
}
