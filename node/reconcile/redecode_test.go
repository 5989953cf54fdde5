package reconcile

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// TestAFullPassDecodesWhatChangedAndKeepsWhatDidNot: a full pass's read of an object
// (redecode) keeps the cached value only for the very bytes it was decoded from: other
// bytes under the same etag (what a full pass is there to catch) are decoded, and a
// malformed object is decoded and reported again at every full pass.
func TestAFullPassDecodesWhatChangedAndKeepsWhatDidNot(t *testing.T) {
	var logged bytes.Buffer
	r := &Reconciler{log: slog.New(slog.NewTextHandler(&logged, nil))}
	key := fleet.AppKey("shop")
	v1 := store.Object{Key: key, ETag: "e1", Value: []byte(`{"name":"shop","account":"acme","placement":["vps-a"]}`)}
	c1 := r.decode(v1)
	same := r.redecode(store.Object{Key: key, ETag: "e2", Value: bytes.Clone(v1.Value)}, c1, true)
	if same.etag != "e2" || same.value.(fleet.App).Account != "acme" {
		t.Fatalf("the same bytes again: %+v", same)
	}
	v2 := store.Object{Key: key, ETag: "e2", Value: []byte(`{"name":"shop","account":"other","placement":["vps-a"]}`)}
	if c := r.redecode(v2, same, true); c.value.(fleet.App).Account != "other" {
		t.Fatalf("other bytes under the same etag kept the cached value: %+v", c)
	}
	bad := store.Object{Key: key, ETag: "e3", Value: []byte(`{"name":`)}
	c := r.decode(bad)
	logged.Reset()
	if c = r.redecode(bad, c, true); c.bad == "" || !strings.Contains(logged.String(), "skipping malformed store object") {
		t.Fatalf("a malformed object read again: %+v, logged %q", c, logged.String())
	}
}
