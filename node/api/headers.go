package api

// Headers of the routing endpoints' answers (200 and 304).
const (
	// HeaderSerial and HeaderEpoch: the store serial (and epoch) the answer was
	// derived from. An ingress never applies a configuration of an older serial than
	// one it applied (DESIGN §6).
	HeaderSerial = "X-Scafo-Serial"
	HeaderEpoch  = "X-Scafo-Epoch"
	// HeaderRevision: the revision of the document (or group selection) served.
	HeaderRevision = "X-Scafo-Revision"
	// HeaderGroupEmpty names the groups of a ?group= selection that hold no route.
	HeaderGroupEmpty = "X-Scafo-Group-Empty"
)

// Headers of a poll that reports what its ingress holds.
const (
	HeaderIngress         = "X-Scafo-Ingress"
	HeaderIngressKind     = "X-Scafo-Ingress-Kind"
	HeaderAppliedSerial   = "X-Scafo-Applied-Serial"
	HeaderAppliedEpoch    = "X-Scafo-Applied-Epoch"
	HeaderAppliedRevision = "X-Scafo-Applied-Revision"
	// HeaderIngressReport answers a poll that carried a report: "recorded", or
	// "refused: <reason>" (the poll is served either way).
	HeaderIngressReport = "X-Scafo-Ingress-Report"
)

// Ingress kinds (HeaderIngressKind).
const (
	// KindPlugin is the provider plugin: it reports what it applied.
	KindPlugin = "plugin"
	// KindHTTP is Traefik's HTTP provider: the node records what it served.
	KindHTTP = "http"
	// KindFront is the layer-4 front (node/front): like the plugin, it reports what it
	// applied, the moment it routes by it.
	KindFront = "front"
)

// Headers of the storage API's answers.
const (
	HeaderStorageModified = "X-Scafo-Modified"
	HeaderStorageSize     = "X-Scafo-Size"
	HeaderStorageTerminal = "X-Scafo-Terminal"
	HeaderLockExpires     = "X-Scafo-Lock-Expires"
)
