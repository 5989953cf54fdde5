package reconcile_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// publishLog records when each "published routing document" was logged.
type publishLog struct {
	mu    sync.Mutex
	times []time.Time
	next  chan struct{} // closed and replaced at each publish
}

func (h *publishLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *publishLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *publishLog) WithGroup(string) slog.Handler            { return h }
func (h *publishLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "published routing document" {
		h.mu.Lock()
		h.times = append(h.times, time.Now())
		close(h.next)
		h.next = make(chan struct{})
		h.mu.Unlock()
	}
	return nil
}

func (h *publishLog) published() ([]time.Time, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.times...), h.next
}

// TestABurstOfChangesPublishesAtMostOncePerWindow: Run publishes on a kick at once after
// a quiet spell, and a kick within the window of the last publish waits for the
// window's end, the kicks that arrive meanwhile coalescing into one pass: a burst of
// changes (readiness churn) publishes at most once per window, and its last change is
// published. The ticker (an hour) publishes nothing here: only kicks do.
func TestABurstOfChangesPublishesAtMostOncePerWindow(t *testing.T) {
	const window = 300 * time.Millisecond
	st := openDir(t, t.TempDir())
	id, h := &store.Identity{}, &publishLog{next: make(chan struct{})}
	pub := publish.New(render.Options{}, "", id.Mark)
	r := reconcile.New(reconcile.Options{Store: st, Publisher: pub, Log: slog.New(h), Identity: id,
		FleetOptions: fleet.GenerateOptions, Heartbeat: time.Hour})
	put := func(i int) {
		nodetest.Put(t, st, fleet.AppKey(fmt.Sprintf("app%02d", i)), fleet.App{Name: fmt.Sprintf("app%02d", i), Account: "acme", Placement: []string{}})
		if _, err := id.Bump(t.Context(), st); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	_, first := h.published()
	kick := make(chan struct{}, 1) // as the node's: a kick never blocks, kicks coalesce
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx, time.Hour, time.Hour, window, kick); close(done) }()
	defer func() { cancel(); <-done }()
	<-first // Run's first pass published app00: the burst starts within its window

	const changes = 12
	for i := 1; i < changes; i++ {
		put(i)
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	start := time.Now()
	lastApp := fmt.Sprintf("app%02d", changes-1)
	for {
		times, next := h.published()
		if cur := pub.Current(); cur != nil && routes(cur.Doc(), lastApp) {
			for i := 1; i < len(times); i++ {
				if gap := times[i].Sub(times[i-1]); gap < window {
					t.Fatalf("publishes %d and %d of the burst %s apart, within the window of %s", i, i+1, gap, window)
				}
			}
			t.Logf("%d publishes for a burst of %d changes", len(times), changes)
			return
		}
		select {
		case <-next:
		case <-time.After(10 * time.Second):
			t.Fatalf("the burst's last change unpublished %s after it (%d publishes)", time.Since(start), len(times))
		}
	}
}
