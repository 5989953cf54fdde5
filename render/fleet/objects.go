// Package fleet holds the fleet-state objects kept in the store (one JSON object per
// key) and Derive, the pure function that folds them into a routing document.
//
// Store layout (the same on every backend):
//
//	apps/<app>.json       App          written by an admin
//	domains/<host>.json   Claim        admin (claim); admin or app token (paths)
//	nodes/<node>.json     NodeRecord   that node only
//	tokens/<id>.json      TokenRecord  admin; never the token itself
//	tokenkey              the fleet's token MAC key (node/fleetwrite), created once by a node
//	serial                a counter bumped after every write that changed something
//
// Unknown fields are rejected on write (the API decodes strictly) and tolerated on read
// (a newer node may have written a field this one does not know).
//
// Derive's rules, and why each exists (fail static, the same-account gate on path
// maps, the prefix cap, app routes winning over the API apex, no empty document), are
// documented on Derive. GenerateState builds synthetic fleets for benchmarks.
package fleet

import "time"

// Store key prefixes.
const (
	PrefixApps    = "apps/"
	PrefixDomains = "domains/"
	PrefixNodes   = "nodes/"
	PrefixTokens  = "tokens/"
	KeySerial     = "serial"
)

// The one spelling of every object key; no call site concatenates prefixes.

// AppKey is the key of application name.
func AppKey(name string) string { return PrefixApps + name + ".json" }

// ClaimKey is the key of the claim on host.
func ClaimKey(host string) string { return PrefixDomains + host + ".json" }

// NodeKey is the key of node name's record.
func NodeKey(name string) string { return PrefixNodes + name + ".json" }

// TokenKey is the key of the application token with id.
func TokenKey(id string) string { return PrefixTokens + id + ".json" }

// App is an application: a name, the account that owns it, and the nodes it runs on in
// priority order.
type App struct {
	// Name is a DNS label; the app's platform hosts are "<name>.<platform-domain>".
	Name string `json:"name"`
	// ID names this incarnation of the application: minted by the node when the
	// application is created, never changed after. A deleted and recreated application
	// of the same name has another ID, so the old incarnation's instances and tokens
	// (which carry the ID they were made for) never act for the new one. Empty for
	// applications created before incarnations existed.
	ID string `json:"id,omitempty"`
	// Account owns the application. Path maps may only point within one account.
	Account string `json:"account"`
	// Placement lists node names in priority order: the first ready one is primary.
	Placement []string `json:"placement"`
	// Health optionally names the application's own health-check path.
	Health *Health `json:"health,omitempty"`
	// ControlPlane marks the platform's own console: service (app) tokens are refused
	// on it outright.
	ControlPlane bool `json:"controlPlane,omitempty"`
	// Ingress places the application in an ingress group (admin-set). Absent: the
	// group routing.DefaultGroup.
	Ingress *Ingress `json:"ingress,omitempty"`
	// Passthrough marks an application that terminates TLS itself (docs/design.md §2):
	// its hosts are routed at layer 4 by their exact TLS server name, the client's
	// handshake reaching the instance unchanged, never as HTTP. Its hosts are exact
	// names only (no wildcard claim), none has a path map or is a path map's target,
	// and it declares no HTTP health path (the node probes it by TCP connect).
	Passthrough bool `json:"passthrough,omitempty"`
	// ProxyProtocol, with Passthrough, is the PROXY protocol version an ingress sends
	// the instance before the client's bytes: absent (0) none, 2 a v2 header.
	ProxyProtocol int `json:"proxyProtocol,omitempty"`
	// Middlewares are the Traefik middlewares every router of the application uses, in
	// order, by reference ("auth@file": routing.ValidateMiddleware), each defined by the
	// operator in their ingresses and declared in the node configuration
	// (traefik.middlewares). Admin-set; none on a passthrough application.
	Middlewares []string `json:"middlewares,omitempty"`
}

// Ingress is an application's ingress placement.
type Ingress struct {
	// Group is the ingress group serving every host of the application (its platform
	// hosts, its claims and their path maps): a DNS label (routing.ValidateGroup).
	Group string `json:"group"`
}

// GroupOf returns the application's ingress group: its Ingress.Group, or
// routing.DefaultGroup when it names none.
func (a *App) GroupOf() string {
	if a.Ingress == nil || a.Ingress.Group == "" {
		return "default"
	}
	return a.Ingress.Group
}

// Health is an application's health-check declaration.
type Health struct {
	// Path is an absolute URL path, e.g. "/healthz".
	Path string `json:"path"`
}

// Claim is one custom hostname held by one application, with its optional path map.
type Claim struct {
	// Host is a canonical DNS name or a one-label wildcard ("*.shop.example.org").
	Host string `json:"host"`
	// Account must be the account of App.
	Account string `json:"account"`
	// App is the application holding the host.
	App string `json:"app"`
	// Paths maps a bare first path segment to the host of another route of the same
	// account. Published wholesale.
	Paths map[string]string `json:"paths,omitempty"`
}

// NodeRecord is a node's own report: where it is and what runs on it.
type NodeRecord struct {
	// Name is a DNS label, unique in the fleet.
	Name string `json:"name"`
	// Address is the node's IP on the fleet's private network.
	Address string `json:"address"`
	// APIPort is the port of the node's API listener.
	APIPort int `json:"apiPort"`
	// Instances are the application instances on this node, by application name.
	Instances map[string]Instance `json:"instances,omitempty"`
	// Seen is the node's last heartbeat. Records older than the TTL are stale.
	Seen time.Time `json:"seen"`
	// Settings are the fleet-wide settings this node runs with, so that a node whose
	// settings differ from the others can be reported.
	Settings *NodeSettings `json:"settings,omitempty"`
	// Boot identifies the process that wrote the record, so that two live nodes
	// configured with one name (each overwriting the other's record at every heartbeat)
	// are noticed. Absent in records written by nodes that predate it. Not routing
	// content: it never reaches the document.
	Boot *Boot `json:"boot,omitempty"`
}

// Boot is a node record's writer: which installation, and which run of it.
type Boot struct {
	// Node is the node's instance id, minted once into its state dir
	// (<stateDir>/node-id): every run of one installation carries the same, another
	// machine (another state dir) a different one. A record of the same Node is this
	// node's own previous run, so a restart is never mistaken for a duplicate.
	Node string `json:"node"`
	// ID is minted at every process start: a record with another ID written while this
	// process runs was written by someone else.
	ID string `json:"id"`
}

// Instance is one application's process on one node.
type Instance struct {
	// Port the instance listens on, at the node's Address.
	Port int `json:"port"`
	// Ready is true while the instance should receive traffic.
	Ready bool `json:"ready"`
	// AppID is the App.ID of the incarnation the instance was made for; an instance
	// of another incarnation is never routed.
	AppID string `json:"appId,omitempty"`
}

// NodeSettings are the settings every node of a fleet must agree on.
type NodeSettings struct {
	PlatformDomains []string `json:"platformDomains"`
	APIPublic       bool     `json:"apiPublic"`
	// DomainGroups maps a platform domain to its ingress group (absent: none mapped).
	DomainGroups map[string]string `json:"domainGroups,omitempty"`
}

// TokenRecord is an application token's record. The token itself is never stored.
type TokenRecord struct {
	ID      string   `json:"id"`
	Account string   `json:"account"`
	App     string   `json:"app"`
	Roles   []string `json:"roles"`
	// AppID is the App.ID of the incarnation the token was issued for; it acts for
	// no other.
	AppID string `json:"appId,omitempty"`
	// SHA256 is the hex SHA-256 of the token.
	SHA256 string `json:"sha256"`
}

// Token roles.
const (
	RolePublish  = "publish"
	RoleInstance = "instance"
)
