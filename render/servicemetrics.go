package render

import "regexp"

// ServiceApplicationRegex maps the service label of Traefik's service metrics
// (traefik_service_requests_total, traefik_service_request_duration_seconds_bucket, …) back
// to the application, as PromQL's label_replace reads it (anchored at both ends):
//
//	label_replace(<v>, "application", "$1", "service", ServiceApplicationRegex)
//
// It matches the leaves of an application's chain, app-<app>.<i>.<node>, with the provider
// suffix Traefik adds (@http, @plugin-scafo, @file), and nothing else. Traefik v3.6 records
// service metrics inside a load balancer, per server (pkg/server/service/service.go,
// getLoadBalancerServiceHandler), so a failover (app-<app>, app-<app>.failover<i>) never has
// a series and a request counts once, at the leaf that answered it; a load balancer without
// servers (an application with nothing ready, "deny") has none either. An application name is
// one DNS label (routing.ValidateLabel), which esc leaves as it is: the capture is the name.
// The node API's chain (api, api.<i>.<node>) and the applied probe's services are not
// applications. docs/operating.md ("Traffic per application") documents it.
const ServiceApplicationRegex = `app-([a-z0-9-]+)\.[0-9]+\.[a-z0-9_~-]+@[^@]+`

var serviceApplicationRE = regexp.MustCompile(`^(?:` + ServiceApplicationRegex + `)$`)

// ServiceApplication returns the application whose traffic a Traefik service metric's
// service label counts, and false for a service that is no application's leaf (see
// ServiceApplicationRegex, which it applies: the dashboard's label_replace and this function
// cannot disagree).
func ServiceApplication(service string) (app string, ok bool) {
	m := serviceApplicationRE.FindStringSubmatch(service)
	if m == nil {
		return "", false
	}
	return m[1], true
}
