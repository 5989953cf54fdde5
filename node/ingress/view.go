package ingress

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
)

// View is the fleet's ingresses as one node sees them.
type View struct {
	Ingresses []api.Ingress `json:"ingresses"`
	Skipped   []api.Skipped `json:"skipped,omitempty"`
	// Error: the store could not be listed; only this node's own ingresses are shown.
	Error string `json:"error,omitempty"`
	// held is each ingress's report (held[i] is Ingresses[i]'s), for waiters.
	held []Report
}

// Fleet returns every ingress: the store's objects (read at most every maxAge),
// overlaid with what this node heard more recently, sorted by name.
func (b *Book) Fleet(ctx context.Context, maxAge time.Duration) View {
	objs, skipped, verr := b.readView(ctx, maxAge)
	reps := map[string]Report{}
	for _, o := range objs {
		reps[o.Name] = o
	}
	b.mu.Lock()
	now := b.Now()
	for name, rep := range b.gone {
		switch o, ok := reps[name]; {
		case now.Sub(rep.Seen) > b.forgetAfter:
			delete(b.gone, name)
		case !ok || rep.Seen.After(o.Seen):
			reps[name] = rep
		}
	}
	for name, li := range b.local {
		rep := li.rep
		if li.inflight > 0 {
			rep.Seen = now
		}
		if o, ok := reps[name]; !ok || !o.Seen.After(rep.Seen) {
			reps[name] = rep
		}
	}
	b.mu.Unlock()
	v := View{Ingresses: []api.Ingress{}, Skipped: skipped}
	if verr != nil {
		v.Error = verr.Error()
	}
	knownSerial, knownEpoch := b.known()
	full, _ := b.current()
	revs := map[string]string{} // by selection: reports share a few
	for _, name := range slices.Sorted(mapKeys(reps)) {
		rep := reps[name]
		rev, ok := revs[rep.Groups]
		if !ok {
			rev = b.revisionFor(rep, full)
			revs[rep.Groups] = rev
		}
		st := api.Ingress{Name: name, Kind: rep.Kind, Node: rep.Node, Groups: rep.Groups, Seen: rep.Seen.UTC(),
			Age: now.Sub(rep.Seen).Round(time.Second).Seconds()}
		held := &api.Held{Serial: rep.Serial, Revision: rep.Revision}
		if Applies(rep.Kind) || rep.Probe {
			st.Applied = held
		} else {
			st.Served = held
		}
		sameEpoch := rep.Epoch == "" || knownEpoch == "" || rep.Epoch == knownEpoch
		switch {
		case rep.Revision != "" && rep.Revision == rev && sameEpoch:
			// The content this node publishes now: whatever serial it was derived at.
		case !sameEpoch || rep.Serial == 0:
			st.Behind = max(knownSerial, 1)
		case rep.Serial < knownSerial:
			st.Behind = knownSerial - rep.Serial
		}
		switch {
		case now.Sub(rep.Seen) > b.lostAfter:
			st.State, st.Refused = "lost", rep.Refused // the reason of polls refused since, if any
		case rep.Refused != "":
			st.State, st.Refused = "refused", rep.Refused
		case st.Behind > 0:
			st.State = "behind"
		default:
			st.State = "current"
		}
		v.Ingresses = append(v.Ingresses, st)
		v.held = append(v.held, rep)
	}
	return v
}

// revisionFor is the revision published to what rep's ingress polls: full (the whole
// document's) or its group selection's.
func (b *Book) revisionFor(rep Report, full string) string {
	if rep.Groups == "" || b.groupRevision == nil {
		return full
	}
	return b.groupRevision(rep.Groups)
}

// readView lists ingresses/ and reads the objects whose etag moved, at most once per
// maxAge (callers share a read); objects not seen for forgetAfter are deleted.
func (b *Book) readView(ctx context.Context, maxAge time.Duration) ([]Report, []api.Skipped, error) {
	b.viewMu.Lock()
	defer b.viewMu.Unlock()
	if !b.viewAt.IsZero() && b.Now().Sub(b.viewAt) < maxAge {
		return b.viewList()
	}
	// A hung store delays a status answer (and whoever shares this read) by this much
	// at most; the answer then says the reports could not be read.
	ctx, cancel := context.WithTimeout(ctx, b.ViewTimeout)
	defer cancel()
	entries, err := b.st.List(ctx, Prefix)
	if err != nil {
		b.viewErr = fmt.Errorf("listing %s: %w", Prefix, err)
		b.viewAt = b.Now()
		return b.viewList()
	}
	now := b.Now()
	foreign := b.foreign != nil && b.foreign()
	// More reports than a view reads (a flood of made-up names, or a fleet past the
	// bound): the most recently written are read (a live ingress's report is rewritten
	// at least every lostAfter/4; key order would let names such as "0000" push every
	// real one out), the view is marked partial, so ?wait=applied never answers
	// "applied" on it and status says so, and the reports left out that no one has
	// written for forgetAfter are deleted by their LIST time, without a read.
	var cutErr error
	if len(entries) > b.ViewMax {
		slices.SortStableFunc(entries, func(x, y store.Entry) int { return y.ModTime.Compare(x.ModTime) })
		rest := entries[b.ViewMax:]
		entries = entries[:b.ViewMax]
		cutErr = fmt.Errorf("partial view: the store holds %d ingress reports, more than the %d a view reads; the %d written least recently are not known",
			len(entries)+len(rest), b.ViewMax, len(rest))
		for _, e := range rest {
			if !foreign && !e.ModTime.IsZero() && now.Sub(e.ModTime) > b.forgetAfter {
				if err := b.st.Delete(ctx, e.Key, e.ETag); err == nil || errors.Is(err, store.ErrNotFound) {
					b.log.Info("forgot an ingress report past the view's bound", "key", e.Key, "written", e.ModTime)
				}
			}
		}
	}
	next := make(map[string]viewObject, len(entries))
	var changed []store.Entry
	for _, e := range entries {
		if old, ok := b.view[e.Key]; ok && old.etag == e.ETag {
			next[e.Key] = old
			continue
		}
		changed = append(changed, e)
	}
	read, err := b.readReports(ctx, changed, now.Add(b.lostAfter))
	maps.Copy(next, read)
	if err != nil {
		// Keep what was read (and the last known state of the rest): the next read GETs
		// only what is still missing, so a cold view of many reports from a slow store
		// completes over a few reads instead of starting over every time. The view is
		// marked partial meanwhile.
		for _, e := range changed {
			if _, ok := next[e.Key]; !ok {
				if old, ok := b.view[e.Key]; ok {
					next[e.Key] = old
				}
			}
		}
		b.view, b.viewAt, b.viewErr = next, now, errors.Join(err, cutErr)
		return b.viewList()
	}
	for k, o := range next {
		if o.bad == "" && now.Sub(o.rep.Seen) > b.forgetAfter && !foreign {
			if err := b.st.Delete(ctx, k, o.etag); err == nil || errors.Is(err, store.ErrNotFound) {
				b.log.Info("forgot an ingress", "ingress", o.rep.Name, "seen", o.rep.Seen)
			}
			delete(next, k)
		}
	}
	b.view, b.viewAt, b.viewErr = next, now, cutErr
	return b.viewList()
}

// readReports GETs entries, at most viewReadConcurrency at once (one after another, a
// store 25 ms away reads 80 reports within defaultViewTimeout; 16 at once, 1 280). It
// returns the objects read (those deleted since the LIST left out) and, when a GET
// failed, the first error; it then starts no more GETs.
func (b *Book) readReports(ctx context.Context, entries []store.Entry, horizon time.Time) (map[string]viewObject, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		read     = make(map[string]viewObject, len(entries))
		firstErr error
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, viewReadConcurrency)
	started := 0
	for _, e := range entries {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			obj, err := b.st.Get(ctx, e.Key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				if firstErr == nil {
					firstErr = fmt.Errorf("reading %s: %w", e.Key, err)
					cancel()
				}
			default:
				read[e.Key] = decode(obj, horizon)
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && started < len(entries) {
		firstErr = fmt.Errorf("reading %s: %w", Prefix, ctx.Err())
	}
	return read, firstErr
}

func (b *Book) viewList() ([]Report, []api.Skipped, error) {
	var reps []Report
	var skipped []api.Skipped
	for _, k := range slices.Sorted(mapKeys(b.view)) {
		o := b.view[k]
		if o.bad != "" {
			skipped = append(skipped, api.Skipped{Object: k, Reason: o.bad})
			continue
		}
		reps = append(reps, o.rep)
	}
	return reps, skipped, b.viewErr
}
