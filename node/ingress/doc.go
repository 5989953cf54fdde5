// Package ingress is a node's book of ingress reports (docs/design.md §11): every
// ingress says, on its polls, what it holds.
//
//   - The provider plugin sends X-Scafo-Ingress (its name), X-Scafo-Ingress-Kind:
//     plugin, and the serial, epoch and revision of the configuration it applied
//     (X-Scafo-Applied-Serial, -Epoch, -Revision; absent before it applied one).
//   - A Traefik on the HTTP provider sends X-Scafo-Ingress from its `headers` option
//     and nothing else: the node records what it served it (the serial and revision of
//     a 200), and counts it once that Traefik polls again (its next poll comes a
//     pollInterval later, after it took the answer): "served", never "applied".
//     Unless it also sends X-Scafo-Applied-Probe (one of its entry points): its body
//     then makes it call the node back once it serves it (applied.go), and it holds
//     what its last callback confirmed, nothing before the first.
//
// A report is not routing state: it is kept in ingresses/<name>.json, a key the
// reconcile pass never reads, written without a serial bump, so no report ever moves
// the serial or the revision. The node that receives an ingress's polls writes its
// object when the report changes, and at most every lostAfter/4 to refresh `seen`
// (a heartbeat per ingress); never more often than MinWriteGap per ingress nor
// writeRate per node. Any node lists ingresses/ to answer for the fleet, only
// when asked (status, a write waiting with ?wait=applied), at most once per
// ViewMaxAge (StatusViewMaxAge for status), and GETs the reports whose etag
// moved, viewReadConcurrency at once; a read cut short keeps what it got.
//
// Names are not authenticated beyond the ingress token, which every ingress shares: a
// holder can report under any name (another ingress's included) and invent names. So
// names are bounded (ingressNameRE, ≤ 63 bytes), a node tracks at most
// ingresses.maxTracked names at once (new names beyond are refused; a name not seen
// for lostAfter frees its place), a reported serial above the node's own is clamped
// to it, and a report never changes what is served.
//
// The book's surface: [New] builds it; [ParseReport] validates a poll's report headers
// (read by node/httpapi: this package knows nothing of HTTP), [Book.Begin] records a
// parsed report as polling and [Book.End] closes the poll with the [Mark] a 200 served;
// [Book.Flush] writes the local reports to the store; [Book.Fleet] is the fleet's view;
// [Book.TakeWaiter]/[Book.ReleaseWaiter] hold the waiter slots of ?wait=applied and
// [Book.Await] waits for a serial to be held. The HTTP handlers that call it live in
// node/httpapi.
package ingress

import "time"

const (
	// Prefix is where the reports are kept: ingresses/<name>.json.
	Prefix = "ingresses/"

	// MinWriteGap: an ingress's object is rewritten at most this often.
	MinWriteGap = 250 * time.Millisecond
	// writeRate/Burst bound this node's report writes, whatever the reports.
	writeRate  = 20
	writeBurst = 40
	// ViewMaxAge: a fleet view younger than this is reused by waiters.
	ViewMaxAge = 200 * time.Millisecond
	// StatusViewMaxAge: a fleet view younger than this is reused by /v1/status.
	StatusViewMaxAge = time.Second
	// MaxObjects bounds the fleet view read from the store.
	MaxObjects = 4096
	// defaultViewTimeout bounds one read of the fleet's reports.
	defaultViewTimeout = 2 * time.Second
	// viewReadConcurrency bounds the GETs of one read of the fleet's reports in flight.
	viewReadConcurrency = 16
	// maxWaiters bounds the writes waiting with ?wait=applied at once on a node.
	maxWaiters = 64
)
