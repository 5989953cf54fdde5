package ingress

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/scafo/ingress/node/api"
)

// Await waits until this node publishes serial (or a later one) and every live
// ingress holds it, or d passes: the answer's envelope, Applied true, or false naming
// the ingresses still behind. With no live ingress (and the fleet's reports read
// whole) the envelope says NoIngress: "applied" then checked nothing an ingress
// serves. done is false when ctx ended first.
func (b *Book) Await(ctx context.Context, serial uint64, d time.Duration) (body api.Applied, done bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(ViewMaxAge / 2)
	defer poll.Stop()
	for {
		changed := b.changes()
		v := b.Fleet(ctx, ViewMaxAge)
		rev, mark := b.current()
		_, epoch := b.known()
		body = api.Applied{Serial: serial, Behind: []api.Ingress{}}
		// Group revisions are read after mark, so from a snapshot at least as new.
		revs := map[string]string{}
		for i, in := range v.Ingresses {
			held := v.held[i]
			if in.State == "lost" {
				continue
			}
			body.Ingresses++
			r, ok := revs[held.Groups]
			if !ok {
				r = b.revisionFor(held, rev)
				revs[held.Groups] = r
			}
			if !holds(held, serial, epoch, r, mark) {
				body.Behind = append(body.Behind, in)
			}
		}
		// This node publishes it too: with no ingress at all, the answer still means
		// "published" (every ingress that polls from now on gets it).
		// Reports that could not be read may be of ingresses behind: never "applied"
		// on a partial view.
		if len(body.Behind) == 0 && mark >= serial && v.Error == "" {
			body.Applied = true
			if body.Ingresses == 0 {
				body.NoIngress = true
				body.Detail = fmt.Sprintf("no ingress polls this fleet: published at serial %d, but no live ingress holds it", serial)
			}
			return body, true
		}
		select {
		case <-ctx.Done():
			return body, false
		case <-deadline.C:
			names := make([]string, len(body.Behind))
			for i, in := range body.Behind {
				names[i] = in.Name
			}
			body.Detail = fmt.Sprintf("written at serial %d; after %s, %d of %d live ingresses do not report it: %s",
				serial, d, len(body.Behind), body.Ingresses, strings.Join(names, ", "))
			if v.Error != "" {
				body.Detail += "; the fleet's reports could not be read (" + v.Error + "): only this node's ingresses are known"
			}
			if mark < serial {
				body.Detail += fmt.Sprintf("; this node has not published it yet (it publishes serial %d)", mark)
			}
			if body.Ingresses == 0 && v.Error == "" {
				body.NoIngress = true
				body.Detail += "; no ingress polls this fleet"
			}
			return body, true
		case <-changed:
		case <-poll.C:
		}
	}
}

// holds reports whether an ingress's report shows it holds the state of serial: it
// reports that serial or a later one (same epoch), or the revision this node publishes
// to it (rev: its group selection's) from a serial at or after it (a write that did not
// move that revision, one in another group, or one a later write superseded, is held by
// an ingress on the same content).
func holds(rep Report, serial uint64, epoch, rev string, mark uint64) bool {
	sameEpoch := rep.Epoch == "" || epoch == "" || rep.Epoch == epoch
	if !sameEpoch {
		return false
	}
	if rep.Serial >= serial && rep.Serial > 0 {
		return true
	}
	return rep.Revision != "" && rep.Revision == rev && mark >= serial
}
