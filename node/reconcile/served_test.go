package reconcile

import (
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// TestServedMemoryOfAnOlderVersionIsAccepted: a state dir written by a version before
// route blocks (its revisions are routing.LegacyRevision) is read after an upgrade, its
// document carrying this version's revision; a document that hashes to neither is
// still refused. Without it, every upgraded node would refuse to start until
// `scafo-node store adopt`.
func TestServedMemoryOfAnOlderVersionIsAccepted(t *testing.T) {
	doc, _ := fleet.Derive(fleet.GenerateState(40, 5), fleet.GenerateOptions())
	old := *doc
	old.Revision = routing.LegacyRevision(doc)
	if old.Revision == doc.Revision {
		t.Fatal("the legacy and current revisions agree: the test proves nothing")
	}
	dir := t.TempDir()
	if err := saveServed(dir, Memory{Epoch: "e1", Serial: 7}, &old); err != nil {
		t.Fatal(err)
	}
	m, got, err := LoadServed(dir)
	if err != nil {
		t.Fatalf("a memory written before route blocks is refused: %v", err)
	}
	if got.Revision != doc.Revision || m.Revision != doc.Revision || m.Serial != 7 {
		t.Fatalf("loaded revision %s (memory %s, serial %d), want %s", got.Revision, m.Revision, m.Serial, doc.Revision)
	}
	bad := *doc
	bad.Revision = "0123456789abcdef0123456789abcdef"
	if err := saveServed(dir, Memory{Epoch: "e1", Serial: 7}, &bad); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadServed(dir); err == nil {
		t.Fatal("a memory whose document hashes to neither revision is accepted")
	}
}
