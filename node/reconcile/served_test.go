package reconcile

import (
	"strings"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// TestServedMemoryWhoseDocumentHashesElsewhereIsRefused: a state dir whose document
// does not hash to the revision it names is refused, naming the file (LoadServed); one
// that does is read back.
func TestServedMemoryWhoseDocumentHashesElsewhereIsRefused(t *testing.T) {
	doc, _ := fleet.Derive(fleet.GenerateState(40, 5), fleet.GenerateOptions())
	dir := t.TempDir()
	if err := saveServed(dir, Memory{Epoch: "e1", Serial: 7}, doc); err != nil {
		t.Fatal(err)
	}
	m, got, err := LoadServed(dir)
	if err != nil || got.Revision != doc.Revision || m.Revision != doc.Revision || m.Serial != 7 {
		t.Fatalf("reading back: %v (revision %v, serial %v), want %s", err, got, m, doc.Revision)
	}
	bad := *doc
	bad.Revision = "0123456789abcdef0123456789abcdef"
	if err := saveServed(dir, Memory{Epoch: "e1", Serial: 7}, &bad); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadServed(dir); err == nil || !strings.Contains(err.Error(), servedFile) {
		t.Fatalf("a memory whose document hashes to another revision: %v, want an error naming %s", err, servedFile)
	}
}
