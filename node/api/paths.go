package api

// Route paths. A path ending in "/" is a prefix: the rest is a path parameter.
const (
	PathHealthz = "/v1/healthz"
	PathReadyz  = "/v1/readyz"
	// PathInstanceHealth + {app}: this node's instance of app, for Traefik's
	// node-delegated health checks.
	PathInstanceHealth = "/v1/health/instances/"
	PathStatus         = "/v1/status"
	// PathIngress + {format}: the routing document or a rendered configuration.
	PathIngress = "/v1/ingress/"
	PathMetrics = "/metrics"
	// PathUI is the status page (its assets are under it); PathUIRoot redirects to it.
	// Never routed on the public apex (routing.DeniedAPIPrefixes lists "/ui").
	PathUI     = "/ui/"
	PathUIRoot = "/ui"

	PathApps = "/v1/apps"
	// PathNodeInstances (+ "/" + {app}): this node's instances.
	PathNodeInstances = "/v1/node/instances"
	PathTokens        = "/v1/tokens"
	PathAudit         = "/v1/audit"

	// PathStorage is the fleet certificates' storage (the ingress token only).
	PathStorage      = "/v1/storage"
	PathStorageKeys  = PathStorage + "/keys"
	PathStorageLocks = PathStorage + "/locks"
)

// Routing formats: /v1/ingress/{format}.
const (
	// FormatRoutes is the routing document.
	FormatRoutes = "routes"
	// FormatTraefik is the rendered Traefik dynamic configuration.
	FormatTraefik = "traefik"
)

// IngressPath is the path of the routing endpoint of format.
func IngressPath(format string) string { return PathIngress + format }

// InstancePath is the path of this node's instance of app.
func InstancePath(app string) string { return PathNodeInstances + "/" + app }

// AppPath is the path of app.
func AppPath(app string) string { return PathApps + "/" + app }

// ClaimPath is the path of app's claim of host.
func ClaimPath(app, host string) string { return AppPath(app) + "/domains/" + host }

// PathsPath is the path of the paths app publishes under host.
func PathsPath(app, host string) string { return ClaimPath(app, host) + "/paths" }
