package httpapi

import "github.com/scafo/ingress/node/api"

// RouteInfo is one route of the table, as the package's external tests read it.
type RouteInfo struct {
	Method, Pattern string // the full pattern: the storage routes under api.PathStorage
	AnyHost         bool   // answered whatever the Host
	Public          bool   // answered without a token
	ReadOnly        bool   // the read-only token may make it
}

// RouteTable is the route table as data.
func RouteTable() []RouteInfo {
	var out []RouteInfo
	for _, rt := range newRouteTable(handlers{}) {
		p := rt.pattern
		if rt.group == groupStorage || rt.group == groupStorageWrite {
			p = api.PathStorage + p
		}
		out = append(out, RouteInfo{Method: rt.method, Pattern: p, AnyHost: rt.anyHost, Public: rt.group == groupPublic, ReadOnly: rt.readOnly})
	}
	return out
}
