package fleetwrite

import (
	"context"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// An identical PUT of an application answers the stored version's etag (the HTTP
// answer's ETag: a client's If-Match keeps matching), as well as writing nothing
// (TestIdenticalPutAppWritesAuditsAndBumpsNothing). Moved from the root package's
// TestIdenticalAppPutChangesNothing, which checked it through a whole node.
func TestIdenticalPutAppAnswersTheStoredETag(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	app := fleet.App{Account: "acme", Placement: []string{"vps-a"}, Health: &fleet.Health{Path: "/healthz"}}
	_, first, _, err := f.w.PutApp(ctx, admin, "shop", app, "")
	if err != nil || first == "" {
		t.Fatalf("first put: etag %q, err %v", first, err)
	}
	_, again, created, err := f.w.PutApp(ctx, admin, "shop", app, "")
	if err != nil || created || again != first {
		t.Fatalf("identical put: etag %q (first %q), created %v, err %v; want the same etag, not created", again, first, created, err)
	}
}
