package reconcile_test

import (
	"context"
	"errors"
	"testing"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// listHook runs hook (once) at the first listing after it is set: inside a pass's full
// read, before the pass commits.
type listHook struct {
	store.Store
	hook func()
}

func (s *listHook) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if h := s.hook; h != nil {
		s.hook = nil
		h()
	}
	return s.Store.List(ctx, prefix)
}

// TestWritesWaitForTheAdoptingPass: adopting a store restored from a backup keeps
// refusing writes (the store foreign) until the adopting pass has advanced its serial
// past the last one served and committed it. A write accepted in between was announced
// on the restored store's own serial, below the one served (hostile review 3: 4, with 7
// served), and ?wait=applied, which counts an ingress that reports a serial at or above
// the write's, answered "applied" at once, for ingresses holding the pre-adopt document.
func TestWritesWaitForTheAdoptingPass(t *testing.T) {
	d := openDir(t, t.TempDir())
	st := &listHook{Store: d}
	node := newSteppedNode(t, st)
	id, pub, stateDir, pass := node.id, node.pub, node.stateDir, node.pass
	nodetest.Put(t, d, fleet.AppKey("shop"), fleet.App{Name: "shop", Account: "acme", Placement: []string{}})
	node.step(t, d)
	restored, epoch := id.Mark()
	for range 5 {
		node.step(t, d)
	}
	served, _, _ := pub.Current().Mark()
	setSerial(t, d, restored, epoch)
	if err := pass(); !errors.Is(err, store.ErrForeign) {
		t.Fatalf("a store gone back from %d to %d: %v, want ErrForeign", served, restored, err)
	}
	if err := reconcile.RequestStoreAdopt(stateDir); err != nil {
		t.Fatal(err)
	}
	during := "the adopting pass read nothing"
	st.hook = func() {
		during = ""
		if !id.Foreign() {
			during = "the store accepted writes (not foreign) before the adopting pass committed it"
		}
	}
	if err := pass(); err != nil {
		t.Fatalf("the adopting pass: %v", err)
	}
	if during != "" {
		t.Fatal(during)
	}
	if id.Foreign() {
		t.Fatalf("foreign after the adopting pass: %s", id.ForeignReason())
	}
	if n, _ := id.Mark(); n <= served {
		t.Fatalf("committed serial %d after the adopt, want one above the %d served", n, served)
	}
}
