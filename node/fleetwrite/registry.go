package fleetwrite

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// Errors of the instance registry (ErrPortTaken 409, ErrPortChurn 409, ErrNoInstance 404,
// ErrNoFreePort 503, ErrPortOutOfRange 400).
var (
	ErrPortTaken      = errors.New("port is held or quarantined by another application")
	ErrNoFreePort     = errors.New("no free port in ports.min..ports.max")
	ErrNoInstance     = errors.New("no instance of that application on this node")
	ErrPortOutOfRange = errors.New("port outside ports.min..ports.max")
	// ErrPortChurn: a move to a new port would leave more than MaxQuarantinedPorts of
	// the application's ports quarantined (409).
	ErrPortChurn = errors.New("too many of this application's ports are quarantined")
)

// MaxQuarantinedPorts bounds the ports one incarnation's moves leave quarantined at
// once. Every move to a new port quarantines the port left, for ports.quarantine, and an
// application token may name any free port of the range: unbounded, one token at
// writes.rate would quarantine thousands of ports within one quarantine and leave none
// for the other applications of the node. Moving back to a port it left costs nothing.
const MaxQuarantinedPorts = 8

// Registry is this node's port allocations, persisted in
// <stateDir>/instances.json so a port survives restarts. Safe for concurrent use.
//
// Why ports are sticky: a runtime process answers everything sent to its port whatever
// Host it names, and ingresses re-read the document on their own timers, so a port that
// changed hands would serve the old application's traffic with the new one. A released
// port is therefore quarantined (not reassigned) for ports.quarantine.
type Registry struct {
	mu         sync.Mutex
	path       string
	min, max   int
	quarantine time.Duration
	reserved   int // never allocated: the node's API port
	now        func() time.Time
	state      registryState
}

type registryState struct {
	Instances  map[string]fleet.Instance `json:"instances"`
	Quarantine []quarantined             `json:"quarantine,omitempty"`
}

type quarantined struct {
	Port  int       `json:"port"`
	App   string    `json:"app"`
	AppID string    `json:"appId,omitempty"`
	Until time.Time `json:"until"`
}

// OpenRegistry opens (or starts) the registry persisted at path, allocating ports in
// min..max and quarantining released ones for quarantine.
func OpenRegistry(path string, min, max int, quarantine time.Duration) (*Registry, error) {
	reg := &Registry{
		path:       path,
		min:        min,
		max:        max,
		quarantine: quarantine,
		now:        time.Now,
		state:      registryState{Instances: map[string]fleet.Instance{}},
	}
	b, err := os.ReadFile(reg.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return reg, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", reg.path, err)
	}
	if err := json.Unmarshal(b, &reg.state); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", reg.path, err)
	}
	if reg.state.Instances == nil {
		reg.state.Instances = map[string]fleet.Instance{}
	}
	return reg, nil
}

// Reserve keeps port out of every allocation (the node's own API port).
func (r *Registry) Reserve(port int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reserved = port
}

// Range is the allocation range.
func (r *Registry) Range() (min, max int) { return r.min, r.max }

// Records is the instances map for this node's record (a copy).
func (r *Registry) Records() map[string]fleet.Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]fleet.Instance, len(r.state.Instances))
	for k, v := range r.state.Instances {
		out[k] = v
	}
	return out
}

func (r *Registry) Get(app string) (fleet.Instance, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.state.Instances[app]
	return i, ok
}

// Allocate returns the port of app's incarnation appID, choosing the lowest free one on
// first use. An instance left by another incarnation of the name (the application was
// deleted and recreated) is released first: its port stays quarantined, so the new
// incarnation never inherits the old owner's process.
func (r *Registry) Allocate(app, appID string) (inst fleet.Instance, created bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.state.Instances[app]; ok && i.AppID == appID {
		return i, false, nil
	}
	r.expire()
	for p := r.min; p <= r.max; p++ {
		if p == r.reserved {
			continue
		}
		if h, hid, _ := r.holder(p); h != "" && (h != app || hid != appID) {
			continue
		}
		prev := r.clone()
		r.retire(app, appID)
		r.state.Instances[app] = fleet.Instance{Port: p, AppID: appID}
		r.dropQuarantine(p)
		if err := r.save(); err != nil {
			r.state = prev
			return fleet.Instance{}, false, err
		}
		return r.state.Instances[app], true, nil
	}
	return fleet.Instance{}, false, ErrNoFreePort
}

// Set records the port (explicit, or the allocated one when port is nil) and readiness
// of app's incarnation appID.
func (r *Registry) Set(app, appID string, port *int, ready bool) (fleet.Instance, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	cur, had := r.state.Instances[app]
	if had && cur.AppID != appID {
		cur, had = fleet.Instance{}, false // another incarnation's: never inherited
	}
	p := cur.Port
	if port != nil {
		p = *port
	}
	if p == 0 {
		return fleet.Instance{}, false, ErrNoInstance
	}
	if p < 1 || p > 65535 {
		return fleet.Instance{}, false, ErrPortOutOfRange
	}
	if h, hid, why := r.holder(p); h != "" && (h != app || hid != appID) {
		if h == app {
			why += " an earlier incarnation of"
		}
		return fleet.Instance{}, false, fmt.Errorf("%w: port %d %s %s", ErrPortTaken, p, why, h)
	}
	next := fleet.Instance{Port: p, Ready: ready, AppID: appID}
	if had && cur == next {
		return cur, false, nil
	}
	if !had || cur.Port != p {
		// A new port: the one left (now, or by a release before) stays quarantined.
		left := 0
		if had {
			left = 1
		}
		if n, first := r.quarantinedBy(app, appID, p); n+left > MaxQuarantinedPorts {
			return fleet.Instance{}, false, fmt.Errorf("%w: %s already leaves %d ports quarantined (at most %d; the first frees at %s); use one of them or the port it holds, or wait",
				ErrPortChurn, app, n, MaxQuarantinedPorts, first.Format(time.RFC3339))
		}
	}
	prev := r.clone()
	r.retire(app, appID)
	if had && cur.Port != p {
		r.state.Quarantine = append(r.state.Quarantine, quarantined{Port: cur.Port, App: app, AppID: appID, Until: r.now().Add(r.quarantine).UTC()})
	}
	r.state.Instances[app] = next
	r.dropQuarantine(p)
	if err := r.save(); err != nil {
		r.state = prev
		return fleet.Instance{}, false, err
	}
	return next, true, nil
}

// Release removes app's instance and quarantines its port.
func (r *Registry) Release(app string) error {
	return r.release(app, func(fleet.Instance) bool { return true })
}

// ReleaseIf releases app's instance only if it belongs to incarnation appID (the
// orphan sweep: a recreated application's new instance is never released on the old
// incarnation's account).
func (r *Registry) ReleaseIf(app, appID string) error {
	return r.release(app, func(i fleet.Instance) bool { return i.AppID == appID })
}

func (r *Registry) release(app string, match func(fleet.Instance) bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.state.Instances[app]
	if !ok || !match(cur) {
		return ErrNoInstance
	}
	prev := r.clone()
	delete(r.state.Instances, app)
	r.state.Quarantine = append(r.state.Quarantine, quarantined{Port: cur.Port, App: app, AppID: cur.AppID, Until: r.now().Add(r.quarantine).UTC()})
	if err := r.save(); err != nil {
		r.state = prev
		return err
	}
	return nil
}

// holder names who holds port p: an app (and incarnation) with an instance on it, or
// one whose released port is still quarantined.
func (r *Registry) holder(p int) (app, appID, why string) {
	for a, i := range r.state.Instances {
		if i.Port == p {
			return a, i.AppID, "is held by"
		}
	}
	for _, q := range r.state.Quarantine {
		if q.Port == p {
			return q.App, q.AppID, "is quarantined until " + q.Until.Format(time.RFC3339) + ", released by"
		}
	}
	return "", "", ""
}

// quarantinedBy counts the quarantined ports released by app's incarnation appID, port
// except, and returns when the first of them frees (caller holds mu).
func (r *Registry) quarantinedBy(app, appID string, except int) (n int, first time.Time) {
	for _, q := range r.state.Quarantine {
		if q.App == app && q.AppID == appID && q.Port != except {
			if n++; first.IsZero() || q.Until.Before(first) {
				first = q.Until
			}
		}
	}
	return n, first
}

// retire quarantines app's instance when it belongs to an incarnation other than
// appID (caller holds mu and saves).
func (r *Registry) retire(app, appID string) {
	if cur, ok := r.state.Instances[app]; ok && cur.AppID != appID {
		delete(r.state.Instances, app)
		r.state.Quarantine = append(r.state.Quarantine, quarantined{Port: cur.Port, App: app, AppID: cur.AppID, Until: r.now().Add(r.quarantine).UTC()})
	}
}

func (r *Registry) expire() {
	now := r.now()
	kept := r.state.Quarantine[:0]
	for _, q := range r.state.Quarantine {
		if now.Before(q.Until) {
			kept = append(kept, q)
		}
	}
	r.state.Quarantine = kept
}

func (r *Registry) dropQuarantine(p int) {
	kept := r.state.Quarantine[:0]
	for _, q := range r.state.Quarantine {
		if q.Port != p {
			kept = append(kept, q)
		}
	}
	r.state.Quarantine = kept
}

func (r *Registry) clone() registryState {
	c := registryState{Instances: make(map[string]fleet.Instance, len(r.state.Instances))}
	for k, v := range r.state.Instances {
		c.Instances[k] = v
	}
	c.Quarantine = append([]quarantined(nil), r.state.Quarantine...)
	return c
}

// save writes the registry atomically (temp file, fsync, rename).
func (r *Registry) save() error {
	sort.Slice(r.state.Quarantine, func(i, j int) bool { return r.state.Quarantine[i].Port < r.state.Quarantine[j].Port })
	b, err := json.MarshalIndent(r.state, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.path), ".instances-*.tmp")
	if err != nil {
		return fmt.Errorf("saving instances: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("saving instances: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving instances: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving instances: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.path); err != nil {
		return fmt.Errorf("saving instances: %w", err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
