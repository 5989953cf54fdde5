package fleetwrite

import (
	"errors"
	"fmt"
	"maps"
	"slices"
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

// portTakenError is ErrPortTaken naming the holder of the port: application App's
// incarnation AppID, and why (held, quarantined until, the idle port of its pair). The
// registry knows no accounts; the writer names the holder only to the admin and to a
// token of the holder's own account (SetInstance).
type portTakenError struct {
	Port       int
	App, AppID string
	Why        string
}

func (e *portTakenError) Error() string {
	return fmt.Sprintf("%v: port %d %s %s", ErrPortTaken, e.Port, e.Why, e.App)
}

func (e *portTakenError) Unwrap() error { return ErrPortTaken }

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
	// fresh: the file was absent at open; unread: no port is issued until the node
	// read its own last record (registry_lastrecord.go).
	fresh, unread bool
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
	// Pending: a port of this node's last record held until a record of this process
	// is announced; Until is then set (registry_lastrecord.go).
	Pending bool `json:"pending,omitempty"`
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

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
