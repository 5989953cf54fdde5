package reconcile

import (
	"log/slog"
	"os"
	"path/filepath"
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

// TestTheServedSerialIsTakenOnlyWhenItIsOfTheSameStoreAndAhead: served-serial raises
// served.json's serial when it names the same epoch and a later serial; absent, torn (a
// crash of the machine before it was written back), of another epoch or behind, served.json's
// serial stands; one present but unreadable is named for the node to log (hostile review 3).
func TestTheServedSerialIsTakenOnlyWhenItIsOfTheSameStoreAndAhead(t *testing.T) {
	doc, _ := fleet.Derive(fleet.GenerateState(3, 1), fleet.GenerateOptions())
	for _, tc := range []struct {
		file    string // "": absent
		want    uint64
		problem string // what SerialProblem says (the node logs it); "": none
	}{
		{"", 7, ""},
		{"9 e1\n", 9, ""},
		{"9 e1", 7, "not \"<serial> <epoch>"}, // torn: no newline
		{"9 e0\n", 7, ""},                     // another store's: not a problem
		{"5 e1\n", 7, ""},
		{"x e1\n", 7, "serial \"x\" is not a number"},
		{"\n", 7, "not \"<serial> <epoch>"},
	} {
		dir := t.TempDir()
		if err := saveServed(dir, Memory{Epoch: "e1", Serial: 7}, doc); err != nil {
			t.Fatal(err)
		}
		if tc.file != "" {
			if err := os.WriteFile(filepath.Join(dir, servedSerialFile), []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		m, _, err := LoadServed(dir)
		if err != nil || m.Serial != tc.want {
			t.Errorf("served-serial %q: serial %v (%v), want %d", tc.file, m, err, tc.want)
			continue
		}
		if tc.problem == "" && m.SerialProblem != "" || tc.problem != "" && (!strings.Contains(m.SerialProblem, tc.problem) || !strings.Contains(m.SerialProblem, servedSerialFile)) {
			t.Errorf("served-serial %q: problem %q, want one naming the file and saying %q", tc.file, m.SerialProblem, tc.problem)
		}
	}
	// What the saver writes is read back.
	dir := t.TempDir()
	s := newServedSaver(dir, slog.New(slog.DiscardHandler))
	s.save(Memory{Epoch: "e1", Serial: 7}, doc)
	s.save(Memory{Epoch: "e1", Serial: 8}, nil) // before the document was written: both, at 8
	s.flush()
	s.save(Memory{Epoch: "e1", Serial: 11}, nil)
	s.flush()
	if m, _, err := LoadServed(dir); err != nil || m.Serial != 11 || m.Revision != doc.Revision {
		t.Fatalf("after the saver: %+v, %v; want serial 11 of revision %s", m, err, doc.Revision)
	}
}
