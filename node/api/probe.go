package api

// The applied probe of an HTTP-provider Traefik (DESIGN §11).
const (
	// HeaderAppliedProbe, on an HTTP-provider Traefik's poll (from its `headers`
	// option, beside HeaderIngress), is the base URL of one of its own entry points
	// ("http://127.0.0.1:80"): the body it is served then makes that Traefik call the
	// node back at PathIngressApplied once it serves it, and ?wait=applied waits for
	// that call instead of counting what was served.
	HeaderAppliedProbe = "X-Scafo-Applied-Probe"
	// PathIngressApplied + <ingress>/<revision>/<mac>: the callback (anonymous; the
	// MAC is the node's).
	PathIngressApplied = PathIngress + "applied/"
)
