package self

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// One name, one node (issue 12, item 10).
//
// Two nodes configured with one node.name overwrite each other's nodes/<name>.json at
// every heartbeat: the fleet's view of that node (its address, its instances) flips
// between two machines and routes flap. So every record carries its writer's boot
// identity (fleet.Boot): the node's instance id, minted once into <stateDir>/node-id,
// and an id minted at each process start.
//
//   - At start (Start, before serving) a node reads its record. If it was written by
//     another installation (another node id) and is live (fleet.NodeLive: seen within
//     reconcile.nodeTTL of this node's clock, either side), the node refuses to start,
//     naming that record's address and age. A record of its own node id is its previous run (a crash and a quick
//     restart): that is not a duplicate. A live record without a boot identity (a node
//     that predates it, possibly this one before an upgrade) is accepted with a warning.
//   - While it runs, a node writes its record conditionally (If-Match the etag of its
//     own last write), so any write by someone else in between is noticed at the next
//     heartbeat, whatever the clocks say; the reconcile pass also reports a record of
//     another boot written after this process started. Either way the node logs an
//     error and reports the other writer in /v1/status (duplicateName) and in
//     scafo_node_name_conflict until the other's record has been out of sight for the
//     TTL. It keeps writing its own record: nothing tells which of the two is the right
//     one, and an operator must rename or stop one.
//
// Two processes sharing one state dir (one node id) are not refused at start, but are
// reported like any duplicate once running (their boot ids differ).
const nodeIDFile = "node-id"

// LoadOrMintNodeID returns the node's instance id from <stateDir>/node-id, minting it
// (16 random bytes, hex) on first use. Not a secret; O_EXCL makes two processes starting
// on one state dir agree on it.
func LoadOrMintNodeID(stateDir string) (string, error) {
	path := filepath.Join(stateDir, nodeIDFile)
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" {
			return "", fmt.Errorf("node id file %s is empty", path)
		}
		return id, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading node id: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("creating state dir: %w", err)
	}
	id := randomHex(16)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrMintNodeID(stateDir)
	}
	if err != nil {
		return "", fmt.Errorf("writing node id: %w", err)
	}
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing node id: %w", err)
	}
	return id, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// nameGuard is what a node knows of its own record and of another writer of it.
type nameGuard struct {
	mu sync.Mutex
	// etag is the etag of nodes/<self>.json as this node last wrote (or read) it, ""
	// for absent; known is false when the node does not know it (before the start
	// check, after a failed write): it is read before the next write.
	etag  string
	known bool
	// other is the last record of another writer seen, and lastSeen when it was last
	// known live (its own Seen, or when this node found its record overwritten).
	other    *fleet.NodeRecord
	lastSeen time.Time
}

// Conflict is a live duplicate: another writer of this node's record, as last seen,
// and when it was last known live.
type Conflict struct {
	Record   fleet.NodeRecord
	LastSeen time.Time
}

// boot is this process's identity, carried in its record.
func (s *Record) boot() *fleet.Boot { return &fleet.Boot{Node: s.nodeID, ID: s.bootID} }

// Address is host:apiPort of a record.
func Address(r fleet.NodeRecord) string {
	return net.JoinHostPort(r.Address, strconv.Itoa(r.APIPort))
}

// checkName refuses to start when another installation holds this node's name: its
// record is live and carries another node id. A store that cannot be read does not
// stop the node (the running checks still apply).
func (s *Record) checkName(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	key := fleet.NodeKey(s.o.Name)
	obj, err := s.o.Store.Get(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.setOwnETag("")
		s.lastRecord(nil)
		return nil
	case err != nil:
		s.o.Log.Warn("cannot check whether another live node holds this node's name; starting", "record", key, "err", err)
		return nil
	}
	var rec fleet.NodeRecord
	if err := json.Unmarshal(obj.Value, &rec); err != nil {
		s.o.Log.Warn("this node's record is malformed; overwriting it", "record", key, "err", err)
		if s.lastRecord(nil) {
			s.setOwnETag(obj.ETag)
		}
		return nil
	}
	if err := s.nameTaken(key, rec); err != nil {
		return err
	}
	if s.lastRecord(rec.Instances) {
		s.setOwnETag(obj.ETag)
	}
	return nil
}

// nameTaken is checkName's verdict on rec, the record at this node's key.
func (s *Record) nameTaken(key string, rec fleet.NodeRecord) error {
	ttl := s.o.NodeTTL
	age := s.started.Sub(rec.Seen)
	switch {
	case !fleet.NodeLive(rec.Seen, s.started, ttl):
		if ahead, skew := fleet.NodeAhead(rec.Seen, s.started, ttl); ahead {
			s.o.Log.Warn("this node's record is dated more than reconcile.nodeTTL ahead of this node's clock: not live (a clock ahead, or a planted record), so it holds nothing; starting",
				"record", key, "seen", rec.Seen.UTC(), "skew", skew.Round(time.Second), "nodeTTL", ttl)
		}
		return nil // stale: a node gone (or this one, long ago), or dated beyond the TTL ahead
	case rec.Boot == nil:
		s.o.Log.Warn("this node's record is live and carries no boot identity (a node that predates it, maybe this one before an upgrade): cannot tell whether another node holds the name",
			"record", key, "address", Address(rec), "age", age.Round(time.Millisecond))
		return nil
	case rec.Boot.Node == s.nodeID:
		s.o.Log.Info("this node's previous run wrote its record", "age", age.Round(time.Millisecond), "boot", rec.Boot.ID)
		return nil
	}
	return fmt.Errorf("node name %q is taken by another live node: %s was written %s ago by the node at %s "+
		"(node id %s, boot %s; this state dir's node id is %s); two nodes with one name overwrite each other's record and routes flap: "+
		"give this node its own --node.name, or, if that node is gone for good, start this one once its record is older than reconcile.nodeTTL (%s)",
		s.o.Name, key, age.Round(time.Millisecond), Address(rec), rec.Boot.Node, rec.Boot.ID, s.nodeID, ttl)
}

// errLastRecordNotHeld: the ports of this node's last record could not be held
// (LastRecord failed): the record is not overwritten, so the next write reads it again.
var errLastRecordNotHeld = errors.New("holding the ports of this node's last record failed: not overwriting it")

// lastRecord tells LastRecord, the first time this process reads its record before
// writing it, the instances it publishes; false when that failed (the record must not
// be overwritten: it is the only account of those ports).
func (s *Record) lastRecord(insts map[string]fleet.Instance) bool {
	if s.lastRead || s.o.LastRecord == nil {
		return true
	}
	if err := s.o.LastRecord(insts); err != nil {
		s.o.Log.Warn("holding the ports of this node's last record", "err", err)
		return false
	}
	s.lastRead = true
	return true
}

func (s *Record) setOwnETag(etag string) {
	s.name.mu.Lock()
	s.name.etag, s.name.known = etag, true
	s.name.mu.Unlock()
}

// putOwnRecord writes body at this node's key conditionally on the etag of its own last
// write; when that fails someone else wrote the record in between: it is read, reported
// when another boot wrote it, and overwritten (once). replaced reports that the write
// did not follow this node's own last write (the first one of this run, one after a
// failure, or one over someone else's): peers may hold anything there.
func (s *Record) putOwnRecord(ctx context.Context, key string, body []byte) (replaced bool, err error) {
	for attempt := 0; ; attempt++ {
		s.name.mu.Lock()
		known, cur := s.name.known, s.name.etag
		s.name.mu.Unlock()
		if !known || attempt > 0 {
			replaced = true
		}
		if !known {
			obj, err := s.o.Store.Get(ctx, key)
			switch {
			case errors.Is(err, store.ErrNotFound):
				cur = ""
				if !s.lastRecord(nil) {
					return true, errLastRecordNotHeld
				}
			case err != nil:
				return true, err
			default:
				cur = obj.ETag
				var rec fleet.NodeRecord
				if json.Unmarshal(obj.Value, &rec) == nil {
					s.See(rec, attempt > 0, time.Now())
				}
				if !s.lastRecord(rec.Instances) {
					return true, errLastRecordNotHeld
				}
			}
		}
		cond := store.Condition{IfMatch: cur}
		if cur == "" {
			cond = store.Condition{IfNoneMatch: true}
		}
		etag, err := s.o.Store.Put(ctx, key, body, cond)
		s.name.mu.Lock()
		s.name.etag, s.name.known = etag, err == nil
		s.name.mu.Unlock()
		if err == nil || !errors.Is(err, store.ErrPreconditionFailed) || attempt > 0 {
			return replaced, err
		}
	}
}

// See notes a record found at this node's key. overwritten: this node found
// it in place of its own last write (so it was written since, whatever its Seen says).
// Otherwise it counts only when written after this process started (an earlier run's
// record is not a duplicate) and live.
func (s *Record) See(rec fleet.NodeRecord, overwritten bool, now time.Time) {
	if rec.Boot != nil && rec.Boot.ID == s.bootID {
		return
	}
	seen := rec.Seen
	if overwritten {
		seen = now
	} else if seen.Before(s.started) || !fleet.NodeLive(seen, now, s.o.NodeTTL) {
		return
	}
	if seen.After(now) {
		seen = now
	}
	s.name.mu.Lock()
	prev := s.conflictLocked(now)
	if prev == nil || seen.After(s.name.lastSeen) {
		s.name.lastSeen = seen
	}
	r := rec
	s.name.other = &r
	s.name.mu.Unlock()
	if prev == nil || overwritten || !sameBoot(prev.Record.Boot, rec.Boot) {
		boot := "none (a node that predates boot identities)"
		if rec.Boot != nil {
			boot = rec.Boot.Node + "/" + rec.Boot.ID
		}
		s.o.Log.Error("another live node writes this node's record: two nodes run with one name, and routes flap between them; rename or stop one",
			"name", s.o.Name, "other", Address(rec), "otherBoot", boot, "otherSeen", rec.Seen,
			"self", net.JoinHostPort(s.o.Address, strconv.Itoa(s.o.APIPort)), "selfBoot", s.nodeID+"/"+s.bootID)
	}
}

func sameBoot(a, b *fleet.Boot) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Conflict is the live duplicate, if any: another writer seen within the TTL.
func (s *Record) Conflict(now time.Time) *Conflict {
	s.name.mu.Lock()
	defer s.name.mu.Unlock()
	return s.conflictLocked(now)
}

func (s *Record) conflictLocked(now time.Time) *Conflict {
	if s.name.other == nil || !fleet.NodeLive(s.name.lastSeen, now, s.o.NodeTTL) {
		return nil
	}
	return &Conflict{Record: *s.name.other, LastSeen: s.name.lastSeen}
}
