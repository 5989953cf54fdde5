package fleetwrite

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// What Audit remembers between reads, so that a page polling the audit log (the status
// page asks every 30 s) costs a list of the recent days, not of every day back to the
// retention horizon, and a record read once is not read again:
//
//   - A day segment at least two days old that listed empty is taken as empty for
//     auditEmptyFor: the writer puts a record in its own today's segment, so only a
//     clock a day off could add to it later, and a restored store is seen within that
//     time. Today and yesterday are always listed.
//   - Records are immutable (a key is written once; the sweep only deletes), so their
//     decoded form is kept in an LRU by key. A deleted record is no longer listed, so
//     it is never answered from the cache. Only a record whose stored form is at most
//     auditRecordCacheMax bytes is kept (a node writes well under 1 KiB): objects
//     planted in audit/ can be up to store.MaxObjectSize each, and 512 of those held
//     for the process's life would be 8 GiB
//     (TestAuditKeepsNoOversizedRecordInMemory).
const (
	auditEmptyFor       = time.Hour
	auditRecordsCache   = 512
	auditRecordCacheMax = 4 << 10
)

type auditMemo struct {
	mu    sync.Mutex
	empty map[string]time.Time // day segment → when it listed empty
	recs  *lru.Cache[string, AuditRecord]
}

func newAuditMemo() *auditMemo {
	c, err := lru.New[string, AuditRecord](auditRecordsCache)
	if err != nil {
		panic(err) // only for a size < 1
	}
	return &auditMemo{empty: map[string]time.Time{}, recs: c}
}

// knownEmpty reports whether seg listed empty within auditEmptyFor of now.
func (m *auditMemo) knownEmpty(seg string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.empty[seg]
	if ok && now.Sub(at) >= auditEmptyFor {
		delete(m.empty, seg)
		return false
	}
	return ok
}

// listedEmpty notes that seg listed empty at now, and forgets what has expired: a day
// that moved past the retention horizon is never asked about again, and would otherwise
// stay for the process's life (TestAuditForgetsExpiredEmptyDays).
func (m *auditMemo) listedEmpty(seg string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, at := range m.empty {
		if now.Sub(at) >= auditEmptyFor {
			delete(m.empty, k)
		}
	}
	m.empty[seg] = now
}

// Audit returns up to limit audit records, newest first: it lists one day's segment at
// a time, from today back to the retention horizon, and stops once it has limit.
func (w *Writer) Audit(ctx context.Context, limit int) ([]AuditRecord, error) {
	if limit < 1 || limit > 10000 {
		return nil, invalid("invalid limit", "limit", fmt.Errorf("limit: 1..10000"))
	}
	out := []AuditRecord{}
	now := w.now()
	for day := now; len(out) < limit && now.Sub(day) <= w.cfg.AuditRetention+24*time.Hour; day = day.Add(-24 * time.Hour) {
		seg := auditSegment(day)
		old := now.Sub(day) >= 48*time.Hour
		if old && w.audit.knownEmpty(seg, now) {
			continue
		}
		entries, err := w.st.List(ctx, seg)
		if err != nil {
			return nil, fmt.Errorf("listing audit: %w", err)
		}
		if old && len(entries) == 0 {
			w.audit.listedEmpty(seg, now)
		}
		for i := len(entries) - 1; i >= 0 && len(out) < limit; i-- {
			key := entries[i].Key
			if rec, ok := w.audit.recs.Get(key); ok {
				out = append(out, rec)
				continue
			}
			obj, err := w.st.Get(ctx, key)
			var rec AuditRecord
			if err != nil || json.Unmarshal(obj.Value, &rec) != nil {
				continue
			}
			if len(obj.Value) <= auditRecordCacheMax {
				w.audit.recs.Add(key, rec)
			}
			out = append(out, rec)
		}
	}
	return out, nil
}
