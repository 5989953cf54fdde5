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
// once. Every move to a port outside the application's pair quarantines the port left,
// for ports.quarantine, and an application token may name any free port of the range:
// unbounded, one token at writes.rate would quarantine thousands of ports within one
// quarantine and leave none for the other applications of the node. A move between the
// two ports of the pair, or back to a port it left, costs nothing.
const MaxQuarantinedPorts = 8

// Registry is this node's port allocations, persisted in
// <stateDir>/instances.json so a port survives restarts. Safe for concurrent use.
//
// Why ports are sticky: a runtime process answers everything sent to its port whatever
// Host it names, and ingresses re-read the document on their own timers, so a port that
// changed hands would serve the old application's traffic with the new one. A released
// port is therefore quarantined (not reassigned) for ports.quarantine.
//
// Pairs (docs/design.md §13): each application incarnation owns two ports, its instance's port
// and an idle one, both held by it (no other application may take either), so a deploy
// starts the new release on the idle port and moves the instance there, and back at the
// next deploy, with no quarantine. The rules:
//
//   - First allocation (Allocate): the lowest two ports of the range that are free or
//     were left by this incarnation, never the node's API port. Set of an application
//     without an instance: the port named and, as second, the lowest port this
//     incarnation left (so a release then a Set takes its pair back whole), else the
//     lowest free one. When no second port is left the instance is unpaired (answered
//     as ports [p, p]) and gets its second port at its next Allocate or Set.
//   - Instances of files written before pairs are unpaired on load, and paired the same
//     way (the lowest free port) at their next Allocate or Set.
//   - Set to either port of the pair: no quarantine, no churn counted, the pair kept.
//   - Set to a port outside the pair: the port left is quarantined and counted against
//     MaxQuarantinedPorts (as before pairs), and the pair becomes {the new port, the
//     idle member}.
//   - Release quarantines both ports; a recreated application (another incarnation)
//     never inherits the old one's pair: both its ports stay quarantined.
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
	Instances map[string]fleet.Instance `json:"instances"`
	// Pairs are the two ports of each instance's incarnation (one of them the
	// instance's port). Absent from files written before pairs.
	Pairs      map[string]pair `json:"pairs,omitempty"`
	Quarantine []quarantined   `json:"quarantine,omitempty"`
}

// pair is the two ports an application incarnation owns on this node, ascending.
type pair struct {
	AppID string `json:"appId,omitempty"`
	Ports [2]int `json:"ports"`
}

func newPair(appID string, a, b int) pair {
	return pair{AppID: appID, Ports: [2]int{min(a, b), max(a, b)}}
}

func (p pair) has(port int) bool { return port != 0 && (p.Ports[0] == port || p.Ports[1] == port) }

// other is the member of p that is not port.
func (p pair) other(port int) int {
	if p.Ports[0] == port {
		return p.Ports[1]
	}
	return p.Ports[0]
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
		state:      registryState{Instances: map[string]fleet.Instance{}, Pairs: map[string]pair{}},
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
	if reg.state.Pairs == nil {
		reg.state.Pairs = map[string]pair{}
	}
	if err := reg.checkLoaded(); err != nil {
		return nil, fmt.Errorf("%s: %w", reg.path, err)
	}
	return reg, nil
}

// checkLoaded checks a registry just read from its file (hand-edited or corrupt) for
// what the registry itself never writes (caller is OpenRegistry):
//
//   - Two applications' instances on one port: an error naming the port and both
//     applications. The node refuses to start, as for an undecodable file: two
//     tenants' hostnames must never dial one process, and which one owns the port is
//     the operator's call, not a guess.
//   - A pair that does not fit is dropped (its instance stays, unpaired, and is
//     paired again at its next Allocate or Set, as for files written before pairs):
//     its instance gone or of another incarnation, both members one port, the
//     instance's port not a member, its idle member outside ports.min..ports.max
//     (the instance's own port may be outside: the admin may set any port), a member
//     that is another application's instance's port or quarantined for another
//     application (or incarnation), and a member of another application's pair (both
//     pairs that share it are dropped: neither is known to own it).
func (r *Registry) checkLoaded() error {
	byPort := map[int]string{}
	for _, app := range sortedKeys(r.state.Instances) {
		p := r.state.Instances[app].Port
		if other, ok := byPort[p]; ok {
			return fmt.Errorf("corrupt instances: port %d is the instance of both %s and %s (two applications' hostnames would dial one process); fix or remove the file", p, other, app)
		}
		byPort[p] = app
	}
	now := r.now()
	for app, pr := range r.state.Pairs {
		i, ok := r.state.Instances[app]
		keep := ok && i.AppID == pr.AppID && pr.Ports[0] != pr.Ports[1] && pr.has(i.Port)
		if keep {
			if idle := pr.other(i.Port); idle < r.min || idle > r.max {
				keep = false
			}
		}
		for _, m := range pr.Ports {
			if h, ok := byPort[m]; keep && ok && h != app {
				keep = false
			}
			for _, q := range r.state.Quarantine {
				if keep && q.Port == m && now.Before(q.Until) && (q.App != app || q.AppID != pr.AppID) {
					keep = false
				}
			}
		}
		if !keep {
			delete(r.state.Pairs, app)
			continue
		}
		r.state.Pairs[app] = newPair(pr.AppID, pr.Ports[0], pr.Ports[1])
	}
	members := map[int][]string{}
	for app, pr := range r.state.Pairs {
		for _, m := range pr.Ports {
			members[m] = append(members[m], app)
		}
	}
	for _, apps := range members {
		if len(apps) > 1 {
			for _, app := range apps {
				delete(r.state.Pairs, app)
			}
		}
	}
	return nil
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

// RecordsAndPorts is Records with each instance's pair (ascending; [p, p] for an
// unpaired instance), read at once.
func (r *Registry) RecordsAndPorts() (map[string]fleet.Instance, map[string][2]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]fleet.Instance, len(r.state.Instances))
	ports := make(map[string][2]int, len(r.state.Instances))
	for k, v := range r.state.Instances {
		out[k] = v
		ports[k] = r.portsOf(k)
	}
	return out, ports
}

func (r *Registry) Get(app string) (fleet.Instance, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.state.Instances[app]
	return i, ok
}

// Ports is app's pair (ascending; [p, p] while unpaired; zero without an instance).
func (r *Registry) Ports(app string) [2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.portsOf(app)
}

// pairOf is app's pair, when its instance has one (caller holds mu).
func (r *Registry) pairOf(app string) (pair, bool) {
	i, ok := r.state.Instances[app]
	if !ok {
		return pair{}, false
	}
	pr, ok := r.state.Pairs[app]
	if !ok || pr.AppID != i.AppID || !pr.has(i.Port) {
		return pair{}, false
	}
	return pr, true
}

// portsOf is what Ports answers (caller holds mu).
func (r *Registry) portsOf(app string) [2]int {
	if pr, ok := r.pairOf(app); ok {
		return pr.Ports
	}
	i, ok := r.state.Instances[app]
	if !ok {
		return [2]int{}
	}
	return [2]int{i.Port, i.Port}
}

// Allocate returns the port of app's incarnation appID and its pair, choosing the lowest
// two free ports on first use. An instance left by another incarnation of the name (the
// application was deleted and recreated) is released first: its ports stay
// quarantined, so the new incarnation never inherits the old owner's process. An
// unpaired instance (a file written before pairs, or a node that had no second port
// free) gets its second port now, when one is free.
func (r *Registry) Allocate(app, appID string) (inst fleet.Instance, ports [2]int, created bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	if i, ok := r.state.Instances[app]; ok && i.AppID == appID {
		if _, paired := r.pairOf(app); !paired {
			if second := r.lowestFree(app, appID, i.Port); second != 0 {
				prev := r.clone()
				r.state.Pairs[app] = newPair(appID, i.Port, second)
				r.dropQuarantine(second)
				if err := r.save(); err != nil {
					r.state = prev
					return fleet.Instance{}, [2]int{}, false, err
				}
			}
		}
		return i, r.portsOf(app), false, nil
	}
	p := r.lowestFree(app, appID)
	if p == 0 {
		return fleet.Instance{}, [2]int{}, false, ErrNoFreePort
	}
	second := r.lowestFree(app, appID, p)
	prev := r.clone()
	r.retire(app, appID)
	r.state.Instances[app] = fleet.Instance{Port: p, AppID: appID}
	r.dropQuarantine(p)
	if second != 0 {
		r.state.Pairs[app] = newPair(appID, p, second)
		r.dropQuarantine(second)
	}
	if err := r.save(); err != nil {
		r.state = prev
		return fleet.Instance{}, [2]int{}, false, err
	}
	return r.state.Instances[app], r.portsOf(app), true, nil
}

// Set records the port (explicit, or the allocated one when port is nil) and readiness
// of app's incarnation appID; changed reports a change of the instance (its port or
// readiness: what the node's record publishes). See Registry for the rules of pairs.
func (r *Registry) Set(app, appID string, port *int, ready bool) (inst fleet.Instance, ports [2]int, changed bool, err error) {
	inst, ports, ch, err := r.set(app, appID, port, ready, true)
	return inst, ports, ch != unchanged, err
}

// change is what a write did to an instance.
type change int

const (
	unchanged change = iota
	// changedUnrouted: the instance changed, what it routes did not (a move of a
	// not-ready instance).
	changedUnrouted
	// rerouted: what the instance routes changed (a ready instance's port, its
	// readiness, its release while ready): a routing change.
	rerouted
)

// errUncharged is a write that would change what an instance routes, made as one that
// would not (uncharged): nothing was written. The writer charges it and writes again.
var errUncharged = errors.New("instance write would change a route and was not charged")

// set is Set deciding, under the lock and with the write, whether it is a routing
// change: one that is, when not charged, writes nothing and answers errUncharged.
func (r *Registry) set(app, appID string, port *int, ready, charged bool) (inst fleet.Instance, ports [2]int, ch change, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	cur, had := r.state.Instances[app]
	if had && cur.AppID != appID {
		cur, had = fleet.Instance{}, false // another incarnation's: never inherited
	}
	pr, paired := pair{}, false
	if had {
		pr, paired = r.pairOf(app)
	}
	p := cur.Port
	if port != nil {
		p = *port
	}
	if p == 0 {
		return fleet.Instance{}, [2]int{}, unchanged, ErrNoInstance
	}
	if p < 1 || p > 65535 {
		return fleet.Instance{}, [2]int{}, unchanged, ErrPortOutOfRange
	}
	if h, hid, why := r.holder(p); h != "" && (h != app || hid != appID) {
		if h == app {
			why += " an earlier incarnation of"
		}
		return fleet.Instance{}, [2]int{}, unchanged, fmt.Errorf("%w: port %d %s %s", ErrPortTaken, p, why, h)
	}
	next := fleet.Instance{Port: p, Ready: ready, AppID: appID}
	if had && paired && cur == next {
		return cur, pr.Ports, unchanged, nil
	}
	if had && !paired {
		// Unpaired (a file written before pairs): the lowest free port becomes the
		// second; then the move, if any, is judged against that pair.
		if second := r.lowestFree(app, appID, cur.Port); second != 0 {
			pr, paired = newPair(appID, cur.Port, second), true
		} else if cur == next {
			return cur, r.portsOf(app), unchanged, nil // no second port free yet
		}
	}
	var newPr pair // the pair after this write (zero: unpaired)
	left := 0      // the port this write leaves (quarantined)
	switch {
	case had && (cur.Port == p || paired && pr.has(p)):
		if paired {
			newPr = pr // within the pair: costs nothing
		}
	case had:
		left = cur.Port
		if paired {
			newPr = newPair(appID, p, pr.other(cur.Port))
		} else if second := r.lowestFree(app, appID, p, cur.Port); second != 0 {
			newPr = newPair(appID, p, second)
		}
	default: // a new instance: its second port, one it left before if any
		second := r.ownQuarantined(app, appID, p)
		if second == 0 {
			second = r.lowestFree(app, appID, p)
		}
		if second != 0 {
			newPr = newPair(appID, p, second)
		}
	}
	if !had || left != 0 {
		// A new port outside the pair: the one left (now, or by a release before) stays
		// quarantined; the ports of the new pair leave the quarantine.
		n, first := r.quarantinedBy(app, appID, newPr.Ports[0], newPr.Ports[1], p)
		if left != 0 {
			n++
		}
		if n > MaxQuarantinedPorts {
			held := n
			if left != 0 {
				held--
			}
			return fleet.Instance{}, [2]int{}, unchanged, fmt.Errorf("%w: %s already leaves %d ports quarantined (at most %d; the first frees at %s); use one of them or the ports it holds, or wait",
				ErrPortChurn, app, held, MaxQuarantinedPorts, first.Format(time.RFC3339))
		}
	}
	reroutes := routed(cur, had) != routed(next, true)
	if reroutes && !charged {
		return fleet.Instance{}, [2]int{}, unchanged, errUncharged
	}
	prev := r.clone()
	r.retire(app, appID)
	if left != 0 {
		r.state.Quarantine = append(r.state.Quarantine, quarantined{Port: left, App: app, AppID: appID, Until: r.now().Add(r.quarantine).UTC()})
	}
	r.state.Instances[app] = next
	r.dropQuarantine(p)
	if newPr.Ports[0] != 0 {
		r.state.Pairs[app] = newPr
		r.dropQuarantine(newPr.Ports[0])
		r.dropQuarantine(newPr.Ports[1])
	} else {
		delete(r.state.Pairs, app)
	}
	if err := r.save(); err != nil {
		r.state = prev
		return fleet.Instance{}, [2]int{}, unchanged, err
	}
	switch {
	case reroutes:
		ch = rerouted
	case !had || cur != next:
		ch = changedUnrouted
	}
	return next, r.portsOf(app), ch, nil
}

// Release removes app's instance and quarantines both ports of its pair.
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
	_, err := r.releaseCharged(app, match, "", true)
	return err
}

// releaseCharged is release deciding, under the lock and with the write, whether it is
// a routing change (the instance is incarnation appID's and ready): one that is, when
// not charged, writes nothing and answers errUncharged. rerouted reports one.
func (r *Registry) releaseCharged(app string, match func(fleet.Instance) bool, appID string, charged bool) (rerouted bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.state.Instances[app]
	if !ok || !match(cur) {
		return false, ErrNoInstance
	}
	rerouted = routed(cur, cur.AppID == appID) != 0
	if rerouted && !charged {
		return false, errUncharged
	}
	prev := r.clone()
	r.drop(app)
	if err := r.save(); err != nil {
		r.state = prev
		return false, err
	}
	return rerouted, nil
}

// drop removes app's instance and pair, quarantining their ports for the instance's
// incarnation (caller holds mu and saves).
func (r *Registry) drop(app string) {
	cur, ok := r.state.Instances[app]
	if !ok {
		return
	}
	ports := r.portsOf(app)
	delete(r.state.Instances, app)
	delete(r.state.Pairs, app)
	until := r.now().Add(r.quarantine).UTC()
	for i, p := range ports {
		if i == 1 && p == ports[0] {
			break // unpaired: one port
		}
		r.dropQuarantine(p) // one entry per port
		r.state.Quarantine = append(r.state.Quarantine, quarantined{Port: p, App: app, AppID: cur.AppID, Until: until})
	}
}

// holder names who holds port p: an app (and incarnation) with an instance on it, one
// whose released port is still quarantined, or one with the idle port of its pair
// there. Pairs come last: a pair never overrides an instance or a quarantine (the
// registry never writes a pair over either; a corrupt file could, and then the
// application left by the port must keep it).
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
	for a, pr := range r.state.Pairs {
		if pr.has(p) {
			return a, pr.AppID, "is the idle port of the pair of"
		}
	}
	return "", "", ""
}

// lowestFree is the lowest port of the range, other than except and the API port,
// that nobody holds or that app's incarnation appID holds or left (0: none; caller
// holds mu).
func (r *Registry) lowestFree(app, appID string, except ...int) int {
	for p := r.min; p <= r.max; p++ {
		if p == r.reserved || slices.Contains(except, p) {
			continue
		}
		if h, hid, _ := r.holder(p); h != "" && (h != app || hid != appID) {
			continue
		}
		return p
	}
	return 0
}

// ownQuarantined is the lowest port of the range (not the API port, not except) that
// app's incarnation appID left and is still quarantined (0: none; caller holds mu).
func (r *Registry) ownQuarantined(app, appID string, except int) int {
	best := 0
	for _, q := range r.state.Quarantine {
		if q.App == app && q.AppID == appID && q.Port != except && q.Port != r.reserved &&
			q.Port >= r.min && q.Port <= r.max && (best == 0 || q.Port < best) {
			if h, hid, _ := r.holder(q.Port); h == app && hid == appID {
				best = q.Port
			}
		}
	}
	return best
}

// quarantinedBy counts the quarantined ports released by app's incarnation appID, but
// the ports except, and returns when the first of them frees (caller holds mu).
func (r *Registry) quarantinedBy(app, appID string, except ...int) (n int, first time.Time) {
	for _, q := range r.state.Quarantine {
		if q.App == app && q.AppID == appID && !slices.Contains(except, q.Port) {
			if n++; first.IsZero() || q.Until.Before(first) {
				first = q.Until
			}
		}
	}
	return n, first
}

// retire quarantines app's instance (both ports of its pair) when it belongs to an
// incarnation other than appID (caller holds mu and saves).
func (r *Registry) retire(app, appID string) {
	if cur, ok := r.state.Instances[app]; ok && cur.AppID != appID {
		r.drop(app)
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
	c := registryState{Instances: maps.Clone(r.state.Instances), Pairs: maps.Clone(r.state.Pairs)}
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
