package traefikprovider

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The state file (StateFile) keeps the last configuration the plugin applied, so that
// a Traefik restarted while no node answers routes from it instead of from nothing
// (Traefik alone starts with no routes and a healthy /ping). It is read at start and
// used only when the first round of polls fails (or nodes answer with a configuration
// older than it), and replaced by every configuration the plugin applies, which is
// never older than it in the store's serial order (X-Scafo-Serial; another epoch, or an
// answer without the header, counts as newer: its place in the order is unknown). A
// body that changes at the same serial replaces it too: fleet certificates (docs/design.md §10)
// are issued and renewed without a serial bump, so a file kept to strictly newer serials
// would keep a configuration without the certificate, or with the one it renewed, for
// as long as routing does not change. Written to a temporary file in the same
// directory, synced, then renamed over the old one: a crash leaves the old file or the
// new one, never a mix. With fleet certificates delivered inline the file holds private
// keys: it is created mode 0600 (os.CreateTemp) and its directory 0700.

// savedState is the state file's content.
type savedState struct {
	V int `json:"v"`
	// Key is the configuration's key (the node's ETag, or a body hash).
	Key       string `json:"key"`
	ETag      bool   `json:"etag"`
	HasSerial bool   `json:"hasSerial"`
	Serial    uint64 `json:"serial"`
	Epoch     string `json:"epoch,omitempty"`
	Revision  string `json:"revision,omitempty"`
	// Config is the configuration as emitted (a JSON object).
	Config json.RawMessage `json:"config"`
}

// loadState reads a state file. A missing file is (nil, nil); a file that does not
// hold a checked configuration is an error (the caller logs it and ignores the file).
func loadState(path string) (*savedState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &savedState{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("not a state file: %w", err)
	}
	if st.V != 1 || st.Key == "" {
		return nil, errors.New("not a state file (no version 1 and key)")
	}
	checked, err := checkConfiguration([]byte(st.Config))
	if err != nil {
		return nil, fmt.Errorf("its configuration: %w", err)
	}
	st.Config = json.RawMessage(checked)
	return st, nil
}

// saveState writes st to path atomically (temp file, fsync, rename).
func saveState(path string, st *savedState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if werr != nil || serr != nil || cerr != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %v %v %v", tmp, werr, serr, cerr)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// notOlderThanSaved reports whether a configuration (hasSerial, serial, epoch) may
// replace the saved one: the same or a later serial of the same epoch (the same serial:
// a new or renewed certificate, which moves no serial), or one whose place in the order
// is unknown (no serial on either side, another epoch).
// A plain function, not a method on a possibly nil pointer: plain constructs for Yaegi.
func notOlderThanSaved(st *savedState, hasSerial bool, serial uint64, epoch string) bool {
	if st == nil {
		return true
	}
	if !hasSerial || !st.HasSerial || epoch != st.Epoch {
		return true
	}
	return serial >= st.Serial
}
