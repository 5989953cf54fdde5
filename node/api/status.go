package api

import (
	"time"
)

// Status is the body of GET /v1/status.
type Status struct {
	Node             string     `json:"node"`
	Ready            bool       `json:"ready"`
	Revision         string     `json:"revision,omitempty"`
	RevisionSince    *time.Time `json:"revisionSince,omitempty"`
	LastPass         *time.Time `json:"lastPass,omitempty"`
	Store            Store      `json:"store"`
	Skipped          []Skipped  `json:"skipped"`
	Nodes            []Node     `json:"nodes"`
	MismatchedConfig []string   `json:"mismatchedSettings,omitempty"`
	// Remembered: the document served is the one remembered in the state dir, because
	// the store is foreign (store.foreign) and nothing was derived from it.
	Remembered bool `json:"servingRemembered,omitempty"`
	// Groups are the known ingress groups with their route counts and the revision
	// ?group=<name> serves.
	Groups []Group `json:"groups,omitempty"`
	// DuplicateName: another live node writes this node's record (the same node.name).
	DuplicateName *DuplicateName `json:"duplicateName,omitempty"`
	// AddressWarning: another live node publishes this node's node.address, or it is a
	// loopback or unspecified address in a fleet of more than one live node.
	AddressWarning *AddressWarning `json:"addressWarning,omitempty"`
	// Instances are this node's instances: declared readiness, published readiness and
	// the probe's state (probe.go).
	Instances []Instance `json:"instances"`
	// Ingresses: every ingress of the fleet and what it holds (node/ingress).
	Ingresses []Ingress `json:"ingresses"`
	// IngressesSkipped: report objects that could not be read, and why.
	IngressesSkipped []Skipped `json:"ingressesSkipped,omitempty"`
	// IngressesError: the reports could not be read from the store; the list holds
	// only the ingresses polling this node.
	IngressesError string `json:"ingressesError,omitempty"`
	// Certificates: fleet certificates per name (--acme.enabled only; acme.go).
	Certificates *Certificates `json:"certificates,omitempty"`
	// Warnings are what serves badly or not at all, in one sentence each: an application
	// with no ready instance (its hosts answer 503), an ingress behind, refused or lost, no ingress
	// polling the fleet. Never absent (written as []); the status page lists them.
	Warnings []string `json:"warnings"`
}

type DuplicateName struct {
	// Address is the other writer's address:apiPort.
	Address string `json:"address"`
	// NodeID and Boot are its boot identity ("" for a node that predates them).
	NodeID     string    `json:"nodeId,omitempty"`
	Boot       string    `json:"boot,omitempty"`
	Seen       time.Time `json:"seen"`
	AgeSeconds float64   `json:"ageSeconds"`
	Detail     string    `json:"detail"`
}

type AddressWarning struct {
	// Address is this node's node.address.
	Address string `json:"address"`
	// SharedWith are the other live nodes (names) that publish the same address.
	SharedWith []string `json:"sharedWith,omitempty"`
	// Loopback: the address is loopback or unspecified and the fleet has LiveNodes > 1.
	Loopback  bool   `json:"loopback,omitempty"`
	LiveNodes int    `json:"liveNodes"`
	Detail    string `json:"detail"`
}

type Store struct {
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// HeartbeatError: this node's own record could not be written (the store refuses
	// writes, a full disk, a lost permission): peers will drop this node's upstreams
	// once its record is older than the TTL. Reachable is false while it is set.
	HeartbeatError string `json:"heartbeatError,omitempty"`
	// UnreachableSince: when the store became unreachable, set whenever Reachable is
	// false for a failed reconcile pass or a failed heartbeat (the earliest failure of
	// the run of failures).
	UnreachableSince *time.Time `json:"unreachableSince,omitempty"`
	// Foreign: the store is not the one this node served (its serial is missing,
	// behind, or of another epoch), or not yet checked against it after a restart:
	// nothing is published from it nor written to it until an operator adopts it.
	Foreign       bool   `json:"foreign"`
	ForeignReason string `json:"foreignReason,omitempty"`
	Adopt         string `json:"adopt,omitempty"`
}

type Skipped struct {
	Object string `json:"object"`
	Reason string `json:"reason"`
}

type Node struct {
	Name       string    `json:"name"`
	Address    string    `json:"address"`
	Seen       time.Time `json:"seen"`
	AgeSeconds float64   `json:"ageSeconds"`
	Stale      bool      `json:"stale"`
}

// Group is one entry of /v1/status groups.
type Group struct {
	Name string `json:"name"`
	// Routes counts the group's own routes (not the cross-group targets its prefixes
	// bring along).
	Routes int `json:"routes"`
	// Revision is the revision served to ?group=<name>.
	Revision string `json:"revision"`
}

// Instance is one of this node's instances in /v1/status.
type Instance struct {
	App  string `json:"app"`
	Port int    `json:"port"`
	// Declared is the readiness set through the API; Ready is what this node publishes
	// (declared AND probe up).
	Declared bool   `json:"declared"`
	Ready    bool   `json:"ready"`
	Probe    *Probe `json:"probe,omitempty"`
}

type Probe struct {
	Kind string `json:"kind"` // tcp or http
	Path string `json:"path,omitempty"`
	Up   bool   `json:"up"`
	// Refused: down without a probe, and why.
	Refused             string     `json:"refused,omitempty"`
	Probes              int        `json:"probes"`
	ConsecutiveFailures int        `json:"consecutiveFailures,omitempty"`
	LastProbe           *time.Time `json:"lastProbe,omitempty"`
	LastDurationMs      float64    `json:"lastDurationMs,omitempty"`
	LastError           string     `json:"lastError,omitempty"`
	Since               time.Time  `json:"since"`
	// Flap damping: recoveries within probe.flapWindow, the hold-down penalty in force
	// (it grows with further flaps), and while held down, when the hold ends.
	Recoveries    int        `json:"recoveries,omitempty"`
	HoldDownMs    float64    `json:"holdDownMs,omitempty"`
	HeldDownUntil *time.Time `json:"heldDownUntil,omitempty"`
}

// Ingress is one ingress in /v1/status and `scafo-node ingresses`.
type Ingress struct {
	Name string `json:"name"`
	// Kind: "plugin" (the provider plugin: Applied), "front" (the layer-4 front,
	// node/front: Applied) or "http" (Traefik's HTTP provider: Served, what the node
	// answered it; Traefik applies it after its throttle).
	Kind string `json:"kind"`
	Node string `json:"node"`
	// Groups is the ?group= selection it polls ("" for every group).
	Groups  string `json:"groups,omitempty"`
	Applied *Held  `json:"applied,omitempty"`
	Served  *Held  `json:"served,omitempty"`
	Behind  uint64 `json:"behind"`
	State   string `json:"state"` // current, behind, refused, lost
	// Refused says why the node it polls refused its last poll (state refused): the
	// admin token on a poll, a bad applied probe, an unknown group, a report refused.
	Refused string    `json:"refused,omitempty"`
	Seen    time.Time `json:"seen"`
	Age     float64   `json:"ageSeconds"`
}

// Held is the configuration an ingress holds.
type Held struct {
	Serial   uint64 `json:"serial"`
	Revision string `json:"revision,omitempty"`
}

// Certificates is /v1/status's certificates section: per name, never key material.
type Certificates struct {
	Counts map[string]int `json:"counts"`
	Names  []CertName     `json:"names"`
}

// CertName is one name of the certificates section: its state, never key material.
type CertName struct {
	Name        string     `json:"name"`
	State       string     `json:"state"`
	NotAfter    *time.Time `json:"notAfter,omitempty"`
	Serial      string     `json:"serial,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	// Attempts counts this node's obtain attempts (0: another node issued it, or none
	// was needed).
	Attempts int `json:"attempts,omitempty"`
	// ObtainedHere: this node obtained the certificate it holds.
	ObtainedHere bool `json:"obtainedHere,omitempty"`
	// Challenge is "dns-01" for a name issued by DNS-01 ("" for HTTP-01), and Phase
	// where its challenge stands while one is in progress (the TXT record written,
	// waiting for it to propagate, with the bound).
	Challenge string `json:"challenge,omitempty"`
	Phase     string `json:"phase,omitempty"`
	// Delegation is a custom wildcard's delegation: the CNAME its customer creates and
	// whether it is in place.
	Delegation *CertDelegation `json:"delegation,omitempty"`
}

// CertDelegation is a custom wildcard's DNS-01 delegation (docs/certificates-dns01.md).
type CertDelegation struct {
	// CNAME is the name the customer creates (_acme-challenge.<name>), Target what it
	// must point at.
	CNAME  string `json:"cname"`
	Target string `json:"target"`
	// InPlace: the CNAME was found pointing at Target when last checked (CheckedAt).
	InPlace   bool       `json:"inPlace"`
	CheckedAt *time.Time `json:"checkedAt,omitempty"`
}
