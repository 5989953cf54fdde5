package fleet

import "time"

// Liveness of a node record is decided here and nowhere else: the render (stale nodes),
// the reconcile pass (when to re-derive), /v1/status, and the node's own start and
// running checks of its name and address all call NodeLive.

// NodeLive reports whether a node record whose heartbeat is dated seen is live at now
// (this node's clock) under ttl (reconcile.nodeTTL): now is within ttl of seen on
// either side. A record more than ttl older than now is a node gone; a record dated
// more than ttl ahead of now (a node whose clock ran ahead, or a planted record) is not
// live either (NodeAhead reports it), so that a dead node with a clock ahead stops being
// routed within 2×ttl and a far-future record holds nothing. A ttl of zero or less:
// every record is live.
func NodeLive(seen, now time.Time, ttl time.Duration) bool {
	if ttl <= 0 {
		return true
	}
	age := now.Sub(seen)
	return age <= ttl && age >= -ttl
}

// NodeAhead reports whether a record dated seen is more than ttl ahead of now, and by
// how much it is ahead (seen - now): the skew to name when reporting it.
func NodeAhead(seen, now time.Time, ttl time.Duration) (ahead bool, skew time.Duration) {
	skew = seen.Sub(now)
	return ttl > 0 && skew > ttl, skew
}
