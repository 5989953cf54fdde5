package fleetsim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/storetest"
)

// memStore is the fleet's store in the simulator: a map in memory whose modification
// times come from the virtual clock (liveness reads them, node/reconcile/liveness.go).
// TestMemStoreIsAStore holds it to the backends' suite.
type memStore struct {
	mu    sync.Mutex
	clock func() time.Time
	objs  map[string]memObject
}

type memObject struct {
	value []byte
	etag  string
	mod   time.Time
}

// snapshot is a copy of the store (a backup); restore puts one back.
func (m *memStore) snapshot() map[string]memObject {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.objs)
}

func (m *memStore) restore(objs map[string]memObject) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs = maps.Clone(objs)
}

func newMemStore(clock func() time.Time) *memStore {
	return &memStore{clock: clock, objs: map[string]memObject{}}
}

func etagOf(v []byte) string {
	h := sha256.Sum256(v)
	return `"` + hex.EncodeToString(h[:12]) + `"`
}

func (m *memStore) Get(ctx context.Context, key string) (store.Object, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Object{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Object{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return store.Object{}, fmt.Errorf("%s: %w", key, store.ErrNotFound)
	}
	return store.Object{Key: key, Value: slices.Clone(o.value), ETag: o.etag}, nil
}

func (m *memStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Object{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return store.Object{}, false, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return store.Object{}, false, fmt.Errorf("%s: %w", key, store.ErrNotFound)
	}
	if o.etag == etag {
		return store.Object{}, false, nil
	}
	return store.Object{Key: key, Value: slices.Clone(o.value), ETag: o.etag}, true, nil
}

func (m *memStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if err := store.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Entry
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, store.Entry{Key: k, ETag: o.etag, ModTime: o.mod})
		}
	}
	slices.SortFunc(out, func(a, b store.Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (m *memStore) Put(ctx context.Context, key string, value []byte, c store.Condition) (string, error) {
	if err := store.CheckKey(key); err != nil {
		return "", err
	}
	if len(value) > store.MaxObjectSize {
		return "", fmt.Errorf("%s: %w", key, store.ErrTooLarge)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if c.IfNoneMatch && ok || c.IfMatch != "" && (!ok || o.etag != c.IfMatch) {
		return "", fmt.Errorf("%s: %w", key, store.ErrPreconditionFailed)
	}
	n := memObject{value: slices.Clone(value), etag: etagOf(value), mod: m.clock()}
	m.objs[key] = n
	return n.etag, nil
}

func (m *memStore) Delete(ctx context.Context, key, ifMatch string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return fmt.Errorf("%s: %w", key, store.ErrNotFound)
	}
	if ifMatch != "" && o.etag != ifMatch {
		return fmt.Errorf("%s: %w", key, store.ErrPreconditionFailed)
	}
	delete(m.objs, key)
	return nil
}

// faultyStore is one node's view of the store: its requests fail (store.ErrUnavailable,
// before anything is changed) while the simulator says so.
type faultyStore struct {
	store.Store
	fail func(op, key string) bool
	// before runs before a request (op: list, get_if_changed or put) that reaches the
	// store: another write, a wipe or a remount may land there.
	before func(op, key string)
}

var errInjected = errors.New("injected store fault")

func (f faultyStore) err(op, key string) error {
	if f.fail(op, key) {
		return fmt.Errorf("%s %s: %w: %w", op, key, store.ErrUnavailable, errInjected)
	}
	return nil
}

func (f faultyStore) Get(ctx context.Context, key string) (store.Object, error) {
	if err := f.err("get", key); err != nil {
		return store.Object{}, err
	}
	return f.Store.Get(ctx, key)
}

func (f faultyStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	if err := f.err("get_if_changed", key); err != nil {
		return store.Object{}, false, err
	}
	f.before("get_if_changed", key)
	return f.Store.GetIfChanged(ctx, key, etag)
}

func (f faultyStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if err := f.err("list", prefix); err != nil {
		return nil, err
	}
	f.before("list", prefix)
	return f.Store.List(ctx, prefix)
}

func (f faultyStore) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	if err := f.err("put", key); err != nil {
		return "", err
	}
	f.before("put", key)
	return f.Store.Put(ctx, key, v, c)
}

func (f faultyStore) Delete(ctx context.Context, key, ifMatch string) error {
	if err := f.err("delete", key); err != nil {
		return err
	}
	return f.Store.Delete(ctx, key, ifMatch)
}

// The simulator's store behaves as the backends do (the suite they pass).
func TestMemStoreIsAStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newMemStore(time.Now) })
}
