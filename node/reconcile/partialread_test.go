package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// routes reports whether doc routes a host to app.
func routes(doc *routing.Document, app string) bool {
	for _, r := range doc.Routes {
		if r.Application == app {
			return true
		}
	}
	return false
}

// failingReads fails the store's List of one prefix or Get of one key while set.
type failingReads struct {
	store.Store
	list, get string
}

var errInjected = errors.New("injected store failure")

func (s *failingReads) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if s.list != "" && prefix == s.list {
		return nil, errInjected
	}
	return s.Store.List(ctx, prefix)
}

func (s *failingReads) Get(ctx context.Context, key string) (store.Object, error) {
	if s.get != "" && key == s.get {
		return store.Object{}, errInjected
	}
	return s.Store.Get(ctx, key)
}

// TestAPassThatCannotReadEverythingChangesNothing: a pass whose listing of one prefix
// or whose read of one changed object fails returns the error and commits nothing: the
// published document, its revision and the serial this node holds stay those of the
// last good pass, and the next pass that reads everything publishes the change. Before,
// only the simulator caught a pass that took a failed read for an empty or a missing
// object (mutation check, M06/M07: 10 of 60 seeds); node/reconcile's own tests passed.
func TestAPassThatCannotReadEverythingChangesNothing(t *testing.T) {
	for _, c := range []struct {
		name      string
		list, get string
	}{
		{name: "a listing fails", list: fleet.PrefixDomains},
		{name: "a read fails", get: fleet.AppKey("blog")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			d := openDir(t, t.TempDir())
			st := &failingReads{Store: d}
			node := newSteppedNode(t, st)
			nodetest.Put(t, d, fleet.AppKey("shop"), fleet.App{Name: "shop", Account: "acme", Placement: []string{}})
			nodetest.Put(t, d, fleet.ClaimKey("shop.example.org"), fleet.Claim{Host: "shop.example.org", Account: "acme", App: "shop"})
			if _, err := store.BumpSerial(ctx, d); err != nil {
				t.Fatal(err)
			}
			if err := node.pass(); err != nil {
				t.Fatal(err)
			}
			before := node.pub.Current()
			held, _ := node.id.Mark()
			if !routes(before.Doc(), "shop") {
				t.Fatalf("the first pass published %+v, want shop routed", before.Doc().Routes)
			}

			nodetest.Put(t, d, fleet.AppKey("blog"), fleet.App{Name: "blog", Account: "acme", Placement: []string{}})
			if _, err := store.BumpSerial(ctx, d); err != nil {
				t.Fatal(err)
			}
			st.list, st.get = c.list, c.get
			if err := node.pass(); !errors.Is(err, errInjected) {
				t.Fatalf("a pass whose read failed: %v, want the failure", err)
			}
			if now := node.pub.Current(); now.Doc().Revision != before.Doc().Revision {
				t.Fatalf("after a failed pass: revision %s, was %s (a partial read was derived)", now.Doc().Revision, before.Doc().Revision)
			}
			if s, _ := node.id.Mark(); s != held {
				t.Fatalf("after a failed pass the node holds serial %d, was %d (a partial read was committed)", s, held)
			}

			st.list, st.get = "", ""
			if err := node.pass(); err != nil {
				t.Fatal(err)
			}
			if now := node.pub.Current(); now.Doc().Revision == before.Doc().Revision || !routes(now.Doc(), "blog") {
				t.Fatalf("the pass after the failure: %+v, want blog routed", now.Doc().Routes)
			}
		})
	}
}

// TestAnObjectTooLargeToReadIsSkippedNotFatal: an object above store.MaxObjectSize
// (corrupt or hostile: nothing the fleet writes comes near) is not read; the pass skips
// it and reports it like a malformed object, and the rest of the fleet keeps routing.
// Before, the pass read it whole (a 1 GiB object exhausted every node's memory) and,
// below that, routed it.
func TestAnObjectTooLargeToReadIsSkippedNotFatal(t *testing.T) {
	// Announced by a bump naming nothing (readAll) and by one naming it (readNamed:
	// hostile review 7, F4).
	for _, named := range []bool{false, true} {
		storeDir := t.TempDir()
		st := openDir(t, storeDir)
		node := newSteppedNode(t, st)
		nodetest.Put(t, st, fleet.AppKey("shop"), fleet.App{Name: "shop", Account: "acme", Placement: []string{}})
		nodetest.Put(t, st, fleet.ClaimKey("shop.example.org"), fleet.Claim{Host: "shop.example.org", Account: "acme", App: "shop"})
		node.step(t, st)
		// A valid application padded past the limit, written behind the store's back (its
		// Put refuses it), then announced so the pass reads it.
		pad := bytes.Repeat([]byte("x"), store.MaxObjectSize)
		huge := append(append([]byte(`{"name":"huge","account":"acme","placement":[],"pad":"`), pad...), `"}`...)
		if err := os.WriteFile(filepath.Join(storeDir, "apps", "huge.json"), huge, 0o600); err != nil {
			t.Fatal(err)
		}
		if !named {
			node.step(t, st)
		} else if _, err := store.BumpSerial(context.Background(), st, fleet.AppKey("huge")); err != nil {
			t.Fatal(err)
		} else if err := node.pass(); err != nil {
			t.Fatalf("named bump: the pass failed: %v", err)
		}
		if sk := node.r.Status().Skipped; !slices.ContainsFunc(sk, func(s fleet.Skipped) bool {
			return s.Object == "apps/huge.json" && strings.HasPrefix(s.Reason, "not read: larger than")
		}) {
			t.Errorf("named bump %v: skipped %+v, want apps/huge.json, not read", named, sk)
		}
		if doc := node.pub.Current().Doc(); !routes(doc, "shop") || routes(doc, "huge") {
			t.Errorf("named bump %v: routes %+v, want shop alone (huge skipped, shop kept)", named, doc.Routes)
		}
	}
}
