package routing

// Delta says how a document was made from an earlier one: it is Base with the
// Upstreams and HealthPath of the routes at the indices in Changed (ascending)
// replaced. Every other field of the document (the hosts and their order, each route's
// application, group and path map, the API section) is Base's. A consumer that keeps
// work per route for Base (render.Incremental) redoes the changed routes alone; one
// that does not ignores it. Produced by fleet.Deriver; Base is not modified.
type Delta struct {
	Base    *Document
	Changed []int
}
