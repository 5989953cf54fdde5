package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scafo/ingress/render/routing"
)

// What a node remembers of its store across restarts (issue 12, item 11).
//
// A restarted node must not accept whatever store it finds: an unmounted disk (an empty
// directory), a wrong bucket or a restored old copy would otherwise publish a document
// without the fleet's routes, with a healthy status, and every Traefik polling it would
// withdraw them. So the node keeps, in <stateDir>/served.json, the store's identity (its
// epoch and serial) and the last document it published from it, rewritten atomically
// whenever the published revision (or the epoch) changes. On start the store identity
// is seeded from it (store.Identity.Seed): a store whose serial is missing, of another
// epoch or behind is foreign, the remembered document is served, writes are refused,
// and nothing changes until an operator adopts the store: `scafo-node store adopt`
// drops <stateDir>/store-adopt, which the node (running, or at its next start) consumes
// by forgetting the remembered identity and accepting the store as it is.
//
// The serial served last is kept apart, in <stateDir>/served-serial ("<serial> <epoch>"),
// rewritten whenever the committed serial moves (at most once per pass, off the
// reconcile goroutine) by a rename, without an fsync: served.json's serial is the one
// of the last revision change, and a store restored from a backup taken between that
// serial and the last one served would pass for this node's, further on, and an older
// state be served (fleetsim -restorecrash). A process crash loses nothing; a crash of the
// machine may lose what the OS had not written back (seconds), and the node then seeds
// from served.json's serial, as before.
const (
	servedFile       = "served.json"
	servedSerialFile = "served-serial"
	AdoptFile        = "store-adopt"
)

// Memory is <stateDir>/served.json.
type Memory struct {
	V int `json:"v"`
	// Epoch and Serial name the store the document was derived from (in served.json, the
	// serial of the last revision change; LoadServed answers the last serial served, from
	// served-serial, when it names the same epoch: a later serial of the same epoch is
	// the same store, further on).
	Epoch  string `json:"epoch"`
	Serial uint64 `json:"serial"`
	// Revision is Document's revision.
	Revision string    `json:"revision"`
	SavedAt  time.Time `json:"savedAt"`
	// Document is the routing document as served (routing.Marshal).
	Document json.RawMessage `json:"document"`
	// SerialProblem, never saved, says why served-serial was present but not read (the
	// node logs it: served.json's serial stands, and a restored store between the two
	// could pass for this node's).
	SerialProblem string `json:"-"`
}

const servedVersion = 1

// seeds reports whether the memory names a store that had a serial (a node that only
// ever saw a store without one has nothing to compare with).
func (m *Memory) Seeds() bool { return m.Epoch != "" || m.Serial > 0 }

// LoadServed reads <stateDir>/served.json (nil, nil when absent) and its document,
// checked: a document whose bytes do not hash to its revision is refused.
func LoadServed(stateDir string) (*Memory, *routing.Document, error) {
	path := filepath.Join(stateDir, servedFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var m Memory
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if m.V != servedVersion {
		return nil, nil, fmt.Errorf("reading %s: version %d, this node reads %d", path, m.V, servedVersion)
	}
	doc, err := routing.Decode(m.Document)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if got := routing.ComputeRevision(doc); got != doc.Revision || got != m.Revision {
		return nil, nil, fmt.Errorf("reading %s: the document hashes to revision %s, the file says %s (%s)", path, got, m.Revision, doc.Revision)
	}
	m.Document = nil
	n, epoch, ok, problem := loadServedSerial(stateDir)
	if ok && epoch == m.Epoch && n > m.Serial {
		m.Serial = n
	}
	if problem != "" {
		m.SerialProblem = fmt.Sprintf("%s: %s; served.json's serial %d stands", filepath.Join(stateDir, servedSerialFile), problem, m.Serial)
	}
	return &m, doc, nil
}

// loadServedSerial reads <stateDir>/served-serial; ok is false when it is absent or
// unreadable (a crash of the machine before it was written back: served.json's serial
// stands), and problem says why when it is there but unreadable.
func loadServedSerial(stateDir string) (n uint64, epoch string, ok bool, problem string) {
	b, err := os.ReadFile(filepath.Join(stateDir, servedSerialFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", false, ""
	}
	if err != nil {
		return 0, "", false, err.Error()
	}
	f := strings.Fields(string(b)) // an epoch-less store (a bare counter) writes none
	if len(f) < 1 || len(f) > 2 || !strings.HasSuffix(string(b), "\n") {
		return 0, "", false, fmt.Sprintf("not \"<serial> <epoch>\\n\" (%d bytes)", len(b))
	}
	if n, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return 0, "", false, fmt.Sprintf("serial %.24q is not a number", f[0])
	}
	if len(f) == 2 {
		epoch = f[1]
	}
	return n, epoch, true, ""
}

// saveServedSerial writes <stateDir>/served-serial atomically (temp file, rename), not
// durably: no fsync (see servedSerialFile).
func saveServedSerial(stateDir string, n uint64, epoch string) error {
	return writeFileAtomic(stateDir, servedSerialFile, fmt.Appendf(nil, "%d %s\n", n, epoch), false)
}

// saveServed writes <stateDir>/served.json atomically (temp file, fsync, rename, fsync
// of the directory): a crash leaves the old memory or the new one, never a torn file.
func saveServed(stateDir string, m Memory, doc *routing.Document) error {
	body, err := routing.Marshal(doc)
	if err != nil {
		return err
	}
	m.V, m.Revision, m.Document = servedVersion, doc.Revision, body
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return writeFileAtomic(stateDir, servedFile, b, true)
}

// servedSaver writes served.json off the reconcile goroutine, so an fsync on a busy
// disk never delays publishing the next revision: save hands over the latest state
// (superseding one not yet written), run writes it, and writes what is pending when
// it stops (Run waits for it), so a restart finds the last published document.
type servedSaver struct {
	dir  string
	log  *slog.Logger
	wake chan struct{}

	mu      sync.Mutex
	pending *servedJob
}

// servedJob is what to write: served.json and served-serial, or served-serial alone
// (doc nil: the revision has not changed, the serial has).
type servedJob struct {
	mem Memory
	doc *routing.Document
}

func newServedSaver(dir string, log *slog.Logger) *servedSaver {
	return &servedSaver{dir: dir, log: log, wake: make(chan struct{}, 1)}
}

func (s *servedSaver) save(m Memory, doc *routing.Document) {
	s.mu.Lock()
	if doc == nil && s.pending != nil && s.pending.doc != nil {
		// A serial moved past a document not yet written: both, at the later serial.
		s.pending.mem.Serial = m.Serial
	} else {
		s.pending = &servedJob{mem: m, doc: doc}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *servedSaver) run(ctx context.Context) {
	for {
		select {
		case <-s.wake:
			s.flush()
		case <-ctx.Done():
			s.flush()
			return
		}
	}
}

func (s *servedSaver) flush() {
	s.mu.Lock()
	j := s.pending
	s.pending = nil
	s.mu.Unlock()
	if j == nil {
		return
	}
	if j.doc != nil {
		if err := saveServed(s.dir, j.mem, j.doc); err != nil {
			s.log.Warn("remembering the served document in the state dir", "err", err)
			return
		}
	}
	if err := saveServedSerial(s.dir, j.mem.Serial, j.mem.Epoch); err != nil {
		s.log.Warn("remembering the served serial in the state dir", "err", err)
	}
}

// writeFileAtomic replaces dir/name with b (mode 0600) atomically: a crash leaves the
// old file or the new one. durable also syncs the file and the directory, so what it
// wrote survives a crash of the machine.
func writeFileAtomic(dir, name string, b []byte, durable bool) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	if !durable {
		return nil
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("syncing %s: %w", dir, err)
		}
	}
	return nil
}

// StoreMemory is what a node's state dir remembers of its store (served.json).
type StoreMemory struct {
	Epoch    string
	Serial   uint64
	Revision string
	SavedAt  time.Time
}

// RememberedStore reads what the node whose state dir is stateDir remembers of its
// store; ok is false when it remembers nothing.
func RememberedStore(stateDir string) (m StoreMemory, ok bool, err error) {
	mem, _, err := LoadServed(stateDir)
	if err != nil || mem == nil {
		return StoreMemory{}, false, err
	}
	return StoreMemory{Epoch: mem.Epoch, Serial: mem.Serial, Revision: mem.Revision, SavedAt: mem.SavedAt}, true, nil
}

// RequestStoreAdopt asks the node whose state dir is stateDir to accept its store as it
// is (`scafo-node store adopt`): a running node does so at its next reconcile pass, a
// stopped one when it starts. The request is consumed once acted on; when the store is
// the one the node serves, it is dropped (there is nothing to adopt).
func RequestStoreAdopt(stateDir string) error {
	fi, err := os.Stat(stateDir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state dir %s is not a directory", stateDir)
	}
	return writeFileAtomic(stateDir, AdoptFile, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), true)
}

// AdoptRequested reports whether an adopt request waits in stateDir.
func AdoptRequested(stateDir string) bool {
	_, err := os.Stat(filepath.Join(stateDir, AdoptFile))
	return err == nil
}

// AdoptHint is the way out of a foreign store, for status and the write API.
func AdoptHint(stateDir string) string {
	return "if this store is meant to be the fleet's, run `scafo-node store adopt --stateDir=" + stateDir +
		"` on this node: it then accepts the store as it is"
}
