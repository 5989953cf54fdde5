package fleetwrite

import (
	"context"
	"strconv"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// pauseFirstRead makes the first SetInstance or ReleaseInstance of w that reads the
// instance wait, between that read and its charge and write, until release is closed;
// read is closed when it got there. Later calls pass through.
func pauseFirstRead(w *Writer) (read, release chan struct{}) {
	read, release = make(chan struct{}), make(chan struct{})
	armed := make(chan struct{}, 1)
	armed <- struct{}{}
	w.afterInstanceRead = func() {
		select {
		case <-armed:
			close(read)
			<-release
		default:
		}
	}
	return read, release
}

// A write that read the instance, found nothing routed would change, and only then
// writes, after a paid change landed meanwhile, changes the route: it is a routing
// change and is charged like one, whatever it read (issue 25, the residual of the
// fourth hostile round: whether a write is paid was decided on a read made before the
// registry's lock, so the second of two interleaved changes went uncharged).
//
// Each case: a budget of burst changes; the instance is allocated (not ready, free);
// the write under test reads it, waits; a paid change makes it ready; then the write
// under test goes on. With a budget of one it must be refused and write nothing; with
// two it passes and the budget is spent.
func TestAWriteRacingAPaidChangeIsChargedForWhatItChanges(t *testing.T) {
	writes := map[string]func(ctx context.Context, w *Writer, tok Actor) error{
		"set not ready": func(ctx context.Context, w *Writer, tok Actor) error {
			_, err := w.SetInstance(ctx, tok, "evil", nil, false)
			return err
		},
		"release": func(ctx context.Context, w *Writer, tok Actor) error {
			return w.ReleaseInstance(ctx, tok, "evil")
		},
	}
	for name, write := range writes {
		for _, burst := range []int{1, 2} {
			t.Run(name+"/budget "+strconv.Itoa(burst), func(t *testing.T) {
				ctx := context.Background()
				bf := newBudgetFixture(t, 1, burst, 0.001)
				w := bf.ws[0]
				tok, _ := evil(t, w, fleet.RoleInstance)
				read, release := pauseFirstRead(w)
				done := make(chan error, 1)
				go func() { done <- write(ctx, w, tok) }()
				<-read // it read "not ready": by that read, nothing routed changes
				if _, err := w.SetInstance(ctx, tok, "evil", nil, true); err != nil {
					t.Fatalf("the paid change (not ready to ready): %v", err)
				}
				close(release)
				err := <-done
				inst, had := w.inst.Get("evil")
				switch burst {
				case 1:
					if !isBudget(err) {
						t.Fatalf("a second routing change against a budget of 1 answered %v (instance now %+v, present %v), want ErrRouteBudget: it went uncharged", err, inst, had)
					}
					if !had || !inst.Ready {
						t.Fatalf("the refused write changed the instance: %+v, present %v; want it ready as the paid change left it", inst, had)
					}
				case 2:
					if err != nil {
						t.Fatalf("a second routing change within a budget of 2: %v", err)
					}
					if had && inst.Ready {
						t.Fatalf("instance %+v: the write made nothing", inst)
					}
					// Both changes were charged: the budget is spent.
					allocate(t, w, tok, "evil")
					if _, err := w.SetInstance(ctx, tok, "evil", nil, true); !isBudget(err) {
						t.Fatalf("a third routing change against a budget of 2 answered %v, want ErrRouteBudget: the second went uncharged", err)
					}
				}
			})
		}
	}
}
