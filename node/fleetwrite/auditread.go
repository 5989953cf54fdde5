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
	recs, _, err := w.AuditFiltered(ctx, AuditFilter{Limit: limit})
	return recs, err
}

// AuditFilter selects audit records: each set field must match (App, Actor, Action
// exactly; Since: at or after it).
type AuditFilter struct {
	Limit              int
	App, Actor, Action string
	Since              time.Time
}

// AuditScanMax bounds the records one filtered read examines (a filter that matches
// little must not read every record back to the retention horizon).
const AuditScanMax = 10000

func (f AuditFilter) match(r AuditRecord) bool {
	return (f.App == "" || r.App == f.App) && (f.Actor == "" || r.Actor == f.Actor) &&
		(f.Action == "" || r.Action == f.Action) && (f.Since.IsZero() || !r.Time.Before(f.Since))
}

// AuditFiltered returns up to f.Limit records matching f, newest first, reading as
// Audit does, back to f.Since (or the retention horizon). It examines at most
// AuditScanMax records; truncated is true when it stopped there, not at the horizon or
// the limit (older matches may exist).
func (w *Writer) AuditFiltered(ctx context.Context, f AuditFilter) (out []AuditRecord, truncated bool, err error) {
	if f.Limit < 1 || f.Limit > 10000 {
		return nil, false, invalid("invalid limit", "limit", fmt.Errorf("limit: 1..10000"))
	}
	out = []AuditRecord{}
	now := w.now()
	horizon := now.Add(-w.cfg.AuditRetention - 24*time.Hour)
	if !f.Since.IsZero() && f.Since.After(horizon) {
		horizon = f.Since.Add(-24 * time.Hour) // the day segment holding Since
	}
	scanned := 0
	for day := now; len(out) < f.Limit && !day.Before(horizon); day = day.Add(-24 * time.Hour) {
		seg := auditSegment(day)
		old := now.Sub(day) >= 48*time.Hour
		if old && w.audit.knownEmpty(seg, now) {
			continue
		}
		entries, err := w.st.List(ctx, seg)
		if err != nil {
			return nil, false, fmt.Errorf("listing audit: %w", err)
		}
		if old && len(entries) == 0 {
			w.audit.listedEmpty(seg, now)
		}
		for i := len(entries) - 1; i >= 0 && len(out) < f.Limit; i-- {
			if scanned == AuditScanMax {
				return out, true, nil
			}
			scanned++
			key := entries[i].Key
			rec, ok := w.audit.recs.Get(key)
			if !ok {
				obj, err := w.st.Get(ctx, key)
				if err != nil || json.Unmarshal(obj.Value, &rec) != nil {
					continue
				}
				if len(obj.Value) <= auditRecordCacheMax {
					w.audit.recs.Add(key, rec)
				}
			}
			if f.match(rec) {
				out = append(out, rec)
			}
		}
	}
	return out, false, nil
}
