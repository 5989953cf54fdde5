// Package storetest is the conformance suite every store.Store backend passes: the
// same behaviour, checked the same way, on a directory and on a real S3 server.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return newEmptyStore(t) })
//	}
//
// newStore must return an empty store that no other test uses; it is called once per
// subtest.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
)

// Options tunes the suite. Zero fields take the defaults.
type Options struct {
	// Goroutines racing in the concurrency subtests (default 100).
	Goroutines int
	// Increments each goroutine must land in the concurrency subtests (default 10).
	Increments int
	// Timeout for each concurrency subtest (default 2 minutes).
	Timeout time.Duration
	// LongSegments: the backend stores keys with segments longer than 255 bytes, as
	// store.CheckKey allows (a domain claim for a 253-byte host has a 258-byte segment).
	// The dir backend does. MinIO does not: it keeps each object under a directory path
	// named by its key, so it refuses a segment longer than a file name may be (400,
	// "Object name contains unsupported characters"), and the S3 suite, run on MinIO,
	// leaves this off. Without it the long-key subtest stops its segments at 255 bytes.
	LongSegments bool
	// PutRaw writes value under key behind the store's back (an object no Put would
	// write: above store.MaxObjectSize). Without it the too-large subtest skips.
	PutRaw func(t *testing.T, s store.Store, key string, value []byte)
	// ETag is the etag the backend gives a content, when it is a function of the
	// content alone (the dir store's dir.ETag); nil: not checked.
	ETag func(value []byte) string
}

func (o Options) withDefaults() Options {
	if o.Goroutines <= 0 {
		o.Goroutines = 100
	}
	if o.Increments <= 0 {
		o.Increments = 10
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	return o
}

// Run runs the suite with default options.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	RunOptions(t, newStore, Options{})
}

// RunOptions runs the suite.
func RunOptions(t *testing.T, newStore func(t *testing.T) store.Store, opts Options) {
	opts = opts.withDefaults()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"GetMissingIsNotFound", testGetMissing},
		{"PutThenGetReturnsSameBytesAndEtag", testRoundtrip},
		{"EtagChangesWithContentAndIsStableForSameContent", testETag},
		{"CreateOnlyTwiceFailsPrecondition", testCreateOnly},
		{"IfMatchStaleFailsAndLeavesValue", testIfMatchStale},
		{"IfMatchCurrentWrites", testIfMatchCurrent},
		{"IfMatchOnAbsentKeyFailsPrecondition", testIfMatchAbsent},
		{"GetIfChangedSkipsCurrentEtag", testGetIfChanged},
		{"ListByPrefixSortedAndScoped", testList},
		{"LongKeysAndSegments", func(t *testing.T, s store.Store) { testLongKeys(t, s, opts) }},
		{"DeleteHonoursIfMatch", testDelete},
		{"PutAboveMaxObjectSizeIsRefused", testPutTooLarge},
		{"ObjectAboveMaxObjectSizeIsNotLoaded", func(t *testing.T, s store.Store) { testTooLargeNotLoaded(t, s, opts) }},
		{"InvalidKeysRefused", testInvalidKeys},
		{"CanceledContextWritesNothing", testCanceled},
		{"ConcurrentCASIncrementsLoseNoUpdate", func(t *testing.T, s store.Store) { testConcurrentCAS(t, s, opts) }},
		{"ConcurrentBumpSerialGivesDistinctValues", func(t *testing.T, s store.Store) { testConcurrentBump(t, s, opts) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s store.Store, key string, value []byte, cond store.Condition) string {
	t.Helper()
	etag, err := s.Put(ctxT(t), key, value, cond)
	if err != nil {
		t.Fatalf("Put(%q, %+v): %v", key, cond, err)
	}
	if etag == "" {
		t.Fatalf("Put(%q) returned an empty etag", key)
	}
	return etag
}

func mustGet(t *testing.T, s store.Store, key string) store.Object {
	t.Helper()
	obj, err := s.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return obj
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func testGetMissing(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	_, err := s.Get(ctx, "apps/missing.json")
	wantErr(t, "Get missing", err, store.ErrNotFound)
	_, changed, err := s.GetIfChanged(ctx, "apps/missing.json", "whatever")
	wantErr(t, "GetIfChanged missing", err, store.ErrNotFound)
	if changed {
		t.Error("GetIfChanged missing: changed = true")
	}
	_, err = s.Get(ctx, "serial")
	wantErr(t, "Get missing top-level", err, store.ErrNotFound)
	wantErr(t, "Delete missing", s.Delete(ctx, "apps/missing.json", ""), store.ErrNotFound)
}

func testRoundtrip(t *testing.T, s store.Store) {
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	tests := []struct {
		name, key string
		value     []byte
	}{
		{"json", "apps/shop.json", []byte(`{"name":"shop","account":"tito"}`)},
		{"empty", "empty", []byte{}},
		{"binary", "bin/all-bytes", binary},
		{"nested", "a/b/c/d.json", []byte("deep\n")},
		{"large", "big/blob", bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)},
		{"unicode key", "domains/exämple.test.json", []byte(`{}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			etag := mustPut(t, s, tc.key, tc.value, store.Condition{})
			obj := mustGet(t, s, tc.key)
			if obj.Key != tc.key {
				t.Errorf("Key = %q, want %q", obj.Key, tc.key)
			}
			if !bytes.Equal(obj.Value, tc.value) {
				t.Errorf("Value = %d bytes %.40q, want %d bytes %.40q", len(obj.Value), obj.Value, len(tc.value), tc.value)
			}
			if obj.ETag != etag {
				t.Errorf("Get ETag = %q, Put returned %q", obj.ETag, etag)
			}
		})
	}
}

func testETag(t *testing.T, s store.Store) {
	const key = "apps/etag.json"
	e1 := mustPut(t, s, key, []byte("one"), store.Condition{})
	e2 := mustPut(t, s, key, []byte("two"), store.Condition{})
	if e1 == e2 {
		t.Fatalf("etag did not change with content: %q", e1)
	}
	e3 := mustPut(t, s, key, []byte("one"), store.Condition{})
	if e3 != e1 {
		t.Errorf("etag for the same content changed: %q then %q", e1, e3)
	}
	if got := mustGet(t, s, key).ETag; got != e3 {
		t.Errorf("Get ETag = %q, want %q", got, e3)
	}
	e4 := mustPut(t, s, key, []byte("one"), store.Condition{IfMatch: e3})
	if e4 != e3 {
		t.Errorf("conditional rewrite of the same content changed the etag: %q then %q", e3, e4)
	}
}

func testCreateOnly(t *testing.T, s store.Store) {
	const key = "tokens/t1.json"
	mustPut(t, s, key, []byte("first"), store.Condition{IfNoneMatch: true})
	_, err := s.Put(ctxT(t), key, []byte("second"), store.Condition{IfNoneMatch: true})
	wantErr(t, "second create-only Put", err, store.ErrPreconditionFailed)
	if got := mustGet(t, s, key).Value; string(got) != "first" {
		t.Errorf("value after refused create = %q, want %q", got, "first")
	}
}

func testIfMatchStale(t *testing.T, s store.Store) {
	const key = "apps/cas.json"
	e1 := mustPut(t, s, key, []byte("v1"), store.Condition{})
	e2 := mustPut(t, s, key, []byte("v2"), store.Condition{IfMatch: e1})
	_, err := s.Put(ctxT(t), key, []byte("v3"), store.Condition{IfMatch: e1})
	wantErr(t, "Put with stale If-Match", err, store.ErrPreconditionFailed)
	obj := mustGet(t, s, key)
	if string(obj.Value) != "v2" || obj.ETag != e2 {
		t.Errorf("after refused write: %q (etag %q), want %q (etag %q)", obj.Value, obj.ETag, "v2", e2)
	}
}

func testIfMatchCurrent(t *testing.T, s store.Store) {
	const key = "apps/cas.json"
	e1 := mustPut(t, s, key, []byte("v1"), store.Condition{IfNoneMatch: true})
	e2 := mustPut(t, s, key, []byte("v2"), store.Condition{IfMatch: e1})
	if e2 == e1 {
		t.Fatalf("etag unchanged after a content change: %q", e2)
	}
	obj := mustGet(t, s, key)
	if string(obj.Value) != "v2" || obj.ETag != e2 {
		t.Errorf("Get = %q (etag %q), want %q (etag %q)", obj.Value, obj.ETag, "v2", e2)
	}
}

func testIfMatchAbsent(t *testing.T, s store.Store) {
	const key = "apps/absent.json"
	e := mustPut(t, s, "apps/other.json", []byte("x"), store.Condition{})
	_, err := s.Put(ctxT(t), key, []byte("v"), store.Condition{IfMatch: e})
	wantErr(t, "Put If-Match on an absent key", err, store.ErrPreconditionFailed)
	_, err = s.Get(ctxT(t), key)
	wantErr(t, "Get after refused write", err, store.ErrNotFound)
}

func testGetIfChanged(t *testing.T, s store.Store) {
	const key = "serial"
	ctx := ctxT(t)
	e1 := mustPut(t, s, key, []byte("1"), store.Condition{})

	obj, changed, err := s.GetIfChanged(ctx, key, e1)
	if err != nil {
		t.Fatalf("GetIfChanged(current): %v", err)
	}
	if changed || obj.Value != nil || obj.ETag != "" {
		t.Errorf("GetIfChanged(current) = %+v, changed=%v; want zero Object, changed=false", obj, changed)
	}

	e2 := mustPut(t, s, key, []byte("2"), store.Condition{IfMatch: e1})
	obj, changed, err = s.GetIfChanged(ctx, key, e1)
	if err != nil {
		t.Fatalf("GetIfChanged(old): %v", err)
	}
	if !changed || string(obj.Value) != "2" || obj.ETag != e2 || obj.Key != key {
		t.Errorf("GetIfChanged(old) = %+v (value %q), changed=%v; want value %q etag %q changed=true", obj, obj.Value, changed, "2", e2)
	}

	obj, changed, err = s.GetIfChanged(ctx, key, "")
	if err != nil || !changed || string(obj.Value) != "2" {
		t.Errorf("GetIfChanged(no etag) = %q, changed=%v, err=%v; want %q, true, nil", obj.Value, changed, err, "2")
	}
}

func testList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	etags := map[string]string{}
	for _, k := range []string{"apps/zed.json", "domains/a.test.json", "apps/shop.json", "apps-old/x.json", "apps/a/b.json", "serial", "apps/shop.json.bak", "nodes/vps-a.json"} {
		etags[k] = mustPut(t, s, k, []byte("value of "+k), store.Condition{})
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"apps/", []string{"apps/a/b.json", "apps/shop.json", "apps/shop.json.bak", "apps/zed.json"}},
		{"apps/s", []string{"apps/shop.json", "apps/shop.json.bak"}},
		{"apps", []string{"apps-old/x.json", "apps/a/b.json", "apps/shop.json", "apps/shop.json.bak", "apps/zed.json"}},
		{"", []string{"apps-old/x.json", "apps/a/b.json", "apps/shop.json", "apps/shop.json.bak", "apps/zed.json", "domains/a.test.json", "nodes/vps-a.json", "serial"}},
		{"nodes/", []string{"nodes/vps-a.json"}},
		{"tokens/", nil},
		{"ser", []string{"serial"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("prefix=%q", tc.prefix), func(t *testing.T) {
			got, err := s.List(ctx, tc.prefix)
			if err != nil {
				t.Fatalf("List(%q): %v", tc.prefix, err)
			}
			var keys []string
			for _, e := range got {
				keys = append(keys, e.Key)
				if e.ETag != etags[e.Key] {
					t.Errorf("List(%q) %s etag = %q, Put returned %q", tc.prefix, e.Key, e.ETag, etags[e.Key])
				}
			}
			if !slices.Equal(keys, tc.want) {
				t.Errorf("List(%q) = %q, want %q", tc.prefix, keys, tc.want)
			}
		})
	}
	// A key that changes shows its new etag; a deleted key leaves the list.
	e := mustPut(t, s, "apps/zed.json", []byte("changed"), store.Condition{})
	if err := s.Delete(ctx, "apps/shop.json", ""); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	got, err := s.List(ctx, "apps/")
	if err != nil {
		t.Fatalf("List after changes: %v", err)
	}
	want := []store.Entry{{Key: "apps/a/b.json", ETag: etags["apps/a/b.json"]}, {Key: "apps/shop.json.bak", ETag: etags["apps/shop.json.bak"]}, {Key: "apps/zed.json", ETag: e}}
	// Every entry carries its modification time (liveness reads it): the store's clock,
	// here the same machine's, so within a generous window of now.
	now := time.Now()
	bare := make([]store.Entry, len(got))
	for i, g := range got {
		if g.ModTime.IsZero() || g.ModTime.Sub(now).Abs() > time.Minute {
			t.Errorf("List after changes: %s ModTime = %v, want within a minute of %v", g.Key, g.ModTime, now)
		}
		bare[i] = store.Entry{Key: g.Key, ETag: g.ETag}
	}
	if !slices.Equal(bare, want) {
		t.Errorf("List after changes = %+v, want %+v", bare, want)
	}
}

// fill returns a key segment of exactly n bytes: start, then 'x's.
func fill(start string, n int) string {
	return start + strings.Repeat("x", n-len(start))
}

// testLongKeys stores long keys with long segments: store.CheckKey takes keys of
// up to MaxKeyLen bytes whatever their segments, and a claim "domains/<host>.json" for a
// 253-byte host (a valid DNS name) has a 258-byte last segment, longer than a file name
// may be. Every operation must work on such keys, and List must return them sorted
// among short keys, under every prefix, including one that ends inside a long segment.
// Without Options.LongSegments the segments stop at 255 bytes.
func testLongKeys(t *testing.T, s store.Store, opts Options) {
	ctx := ctxT(t)
	seg := 255
	if opts.LongSegments {
		seg = 258
	}
	host := fill("m", seg-len(".a.test.json")) // a 253-byte host with LongSegments
	claimA := "domains/" + host + ".a.test.json"
	claimB := "domains/" + host + ".b.test.json" // differs from claimA near its end
	// 511 bytes, two segments over 200 bytes (one over 255 with LongSegments).
	deep := "d/" + fill("long", 254) + "/" + fill("x", 254)
	// MaxKeyLen bytes: one segment with LongSegments, else three.
	longest := fill("s", 255) + "/" + fill("t", 254) + "/u"
	// Three-byte characters: a long segment's chunks cannot split one.
	intl := "i18n/" + strings.Repeat("€", 83) + ".json"
	if opts.LongSegments {
		deep = "d/" + fill("long", 300) + "/" + fill("x", 208)
		longest = fill("s", store.MaxKeyLen)
		intl = "i18n/" + strings.Repeat("€", 100) + ".json"
	}
	for _, k := range []string{claimA, claimB, deep, longest, intl} {
		if err := store.CheckKey(k); err != nil {
			t.Fatalf("test key is invalid: %v", err)
		}
	}
	if n := len(claimA) - len("domains/"); n != seg {
		t.Fatalf("claim segment is %d bytes, want %d", n, seg)
	}
	if len(deep) != 511 || len(longest) != store.MaxKeyLen {
		t.Fatalf("key lengths %d and %d, want 511 and %d", len(deep), len(longest), store.MaxKeyLen)
	}

	value := func(k string) []byte { return []byte("value of " + k) }
	etags := map[string]string{}
	for _, k := range []string{"domains/a.test.json", claimA, "serial", deep, intl, "domains/zz.test.json", claimB, longest, "d/short.json"} {
		etags[k] = mustPut(t, s, k, value(k), store.Condition{IfNoneMatch: true})
	}
	for k, etag := range etags {
		obj := mustGet(t, s, k)
		if obj.Key != k || obj.ETag != etag || !bytes.Equal(obj.Value, value(k)) {
			t.Errorf("Get(%.40q…) = key %.40q…, value %q, etag %q; want the key, %q, %q", k, obj.Key, obj.Value, obj.ETag, value(k), etag)
		}
		if _, changed, err := s.GetIfChanged(ctx, k, etag); err != nil || changed {
			t.Errorf("GetIfChanged(%.40q…, current etag) = changed %v, %v; want false, nil", k, changed, err)
		}
	}
	_, err := s.Put(ctx, claimA, []byte("again"), store.Condition{IfNoneMatch: true})
	wantErr(t, "second create-only Put of a long key", err, store.ErrPreconditionFailed)
	_, err = s.Put(ctx, claimA, []byte("again"), store.Condition{IfMatch: etags[claimB]})
	wantErr(t, "Put of a long key with a stale If-Match", err, store.ErrPreconditionFailed)
	etags[claimA] = mustPut(t, s, claimA, []byte("claim A v2"), store.Condition{IfMatch: etags[claimA]})
	obj, changed, err := s.GetIfChanged(ctx, claimA, etags[claimB])
	if err != nil || !changed || string(obj.Value) != "claim A v2" || obj.Key != claimA || obj.ETag != etags[claimA] {
		t.Errorf("GetIfChanged(claim A, another etag) = %q, changed %v, %v; want %q, true", obj.Value, changed, err, "claim A v2")
	}

	all := []string{deep, "d/short.json", "domains/a.test.json", claimA, claimB, "domains/zz.test.json", intl, "serial", longest}
	tests := []struct {
		name, prefix string
		want         []string
	}{
		{"everything", "", all},
		{"domains", "domains/", []string{"domains/a.test.json", claimA, claimB, "domains/zz.test.json"}},
		{"inside the host's first 200 bytes", "domains/" + host[:150], []string{claimA, claimB}},
		{"inside the host past 200 bytes", "domains/" + host[:230], []string{claimA, claimB}},
		{"the host and one byte more", "domains/" + host + ".a", []string{claimA}},
		{"past the end of every claim", "domains/" + host + ".c", nil},
		{"a whole long key", claimB, []string{claimB}},
		{"a long segment as directory", deep[:strings.LastIndexByte(deep, '/')+1], []string{deep}},
		{"inside a long last segment", deep[:len(deep)-1], []string{deep}},
		{"inside the longest key", longest[:300], []string{longest}},
		{"inside three-byte characters", intl[:len(intl)-len("€€.json")], []string{intl}},
		{"d", "d", []string{deep, "d/short.json", "domains/a.test.json", claimA, claimB, "domains/zz.test.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.prefix)
			if err != nil {
				t.Fatalf("List(%.40q…): %v", tc.prefix, err)
			}
			var keys []string
			for _, e := range got {
				keys = append(keys, e.Key)
				if e.ETag != etags[e.Key] {
					t.Errorf("List: %.40q… etag = %q, Put returned %q", e.Key, e.ETag, etags[e.Key])
				}
			}
			if !slices.Equal(keys, tc.want) {
				t.Errorf("List(%.40q…) =\n%q\nwant\n%q", tc.prefix, keys, tc.want)
			}
		})
	}

	wantErr(t, "Delete of a long key with a stale If-Match", s.Delete(ctx, claimA, etags[claimB]), store.ErrPreconditionFailed)
	for _, k := range []string{claimA, deep, longest, intl} {
		if err := s.Delete(ctx, k, etags[k]); err != nil {
			t.Fatalf("Delete(%.40q…): %v", k, err)
		}
		_, err := s.Get(ctx, k)
		wantErr(t, "Get after Delete", err, store.ErrNotFound)
		wantErr(t, "second Delete", s.Delete(ctx, k, ""), store.ErrNotFound)
	}
	got, err := s.List(ctx, "")
	if err != nil {
		t.Fatalf("List after deletes: %v", err)
	}
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Key)
	}
	if want := []string{"d/short.json", "domains/a.test.json", claimB, "domains/zz.test.json", "serial"}; !slices.Equal(keys, want) {
		t.Errorf("List after deletes =\n%q\nwant\n%q", keys, want)
	}
	// Deleted long keys can be created again, create-only.
	for _, k := range []string{claimA, deep} {
		mustPut(t, s, k, []byte("back"), store.Condition{IfNoneMatch: true})
		if got := mustGet(t, s, k).Value; string(got) != "back" {
			t.Errorf("recreated %.40q… = %q, want %q", k, got, "back")
		}
	}
}

// testPutTooLarge: a value above store.MaxObjectSize is refused (ErrTooLarge) and
// nothing is written: a store never holds what its readers refuse to load.
func testPutTooLarge(t *testing.T, s store.Store) {
	_, err := s.Put(ctxT(t), "big.json", make([]byte, store.MaxObjectSize+1), store.Condition{})
	wantErr(t, "Put above MaxObjectSize", err, store.ErrTooLarge)
	_, err = s.Get(ctxT(t), "big.json")
	wantErr(t, "Get after a refused Put", err, store.ErrNotFound)
	mustPut(t, s, "fits.json", make([]byte, store.MaxObjectSize), store.Condition{})
}

// testTooLargeNotLoaded: an object above store.MaxObjectSize (corrupt or hostile:
// nothing the fleet writes comes near) is not loaded: Get answers ErrTooLarge and, with
// List, allocates far less than it; List names it with an etag a delete conditional on
// it removes it by. Before, Get and List read it whole: a 1 GiB object under apps/
// exhausted the memory of every node on its next pass.
func testTooLargeNotLoaded(t *testing.T, s store.Store, opts Options) {
	if opts.PutRaw == nil {
		t.Skip("the backend offers no raw write (Options.PutRaw)")
	}
	const key = "apps/huge.json"
	big := bytes.Repeat([]byte("x"), store.MaxObjectSize+1)
	opts.PutRaw(t, s, key, big)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := s.Get(ctxT(t), key)
	es, lerr := s.List(ctxT(t), "apps/")
	runtime.ReadMemStats(&after)
	wantErr(t, "Get above MaxObjectSize", err, store.ErrTooLarge)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("Get and List of a %d-byte object allocated %d bytes, want it left unread", len(big), alloc)
	}
	if lerr != nil || len(es) != 1 || es[0].Key != key || es[0].ETag == "" || opts.ETag != nil && es[0].ETag != opts.ETag(big) {
		t.Fatalf("List: %v %+v, want %s with the etag of its content", lerr, es, key)
	}
	if err := s.Delete(ctxT(t), key, es[0].ETag); err != nil {
		t.Fatalf("Delete If-Match the listed etag: %v", err)
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const key = "domains/del.test.json"
	e1 := mustPut(t, s, key, []byte("v1"), store.Condition{})
	e2 := mustPut(t, s, key, []byte("v2"), store.Condition{})
	wantErr(t, "Delete with stale If-Match", s.Delete(ctx, key, e1), store.ErrPreconditionFailed)
	if got := mustGet(t, s, key); string(got.Value) != "v2" {
		t.Fatalf("value after refused delete = %q, want %q", got.Value, "v2")
	}
	if err := s.Delete(ctx, key, e2); err != nil {
		t.Fatalf("Delete with current If-Match: %v", err)
	}
	_, err := s.Get(ctx, key)
	wantErr(t, "Get after delete", err, store.ErrNotFound)
	wantErr(t, "second Delete", s.Delete(ctx, key, ""), store.ErrNotFound)
	wantErr(t, "Delete If-Match of a deleted key", s.Delete(ctx, key, e2), store.ErrNotFound)

	mustPut(t, s, key, []byte("v3"), store.Condition{})
	if err := s.Delete(ctx, key, ""); err != nil {
		t.Fatalf("unconditional Delete: %v", err)
	}
	// Deleted keys can be created again, create-only.
	mustPut(t, s, key, []byte("v4"), store.Condition{IfNoneMatch: true})
}

func testInvalidKeys(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, key := range []string{"", "/abs.json", "a//b", "../escape", "a/../b", "a/./b", "a\\b", "apps/", ".lock", "a/.tmp-1", "nul\x00byte"} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			_, err := s.Get(ctx, key)
			wantErr(t, "Get", err, store.ErrInvalidKey)
			_, err = s.Put(ctx, key, []byte("x"), store.Condition{})
			wantErr(t, "Put", err, store.ErrInvalidKey)
			wantErr(t, "Delete", s.Delete(ctx, key, ""), store.ErrInvalidKey)
		})
	}
	for _, prefix := range []string{"/abs", "../", "a//", "a\\"} {
		_, err := s.List(ctx, prefix)
		wantErr(t, fmt.Sprintf("List(%q)", prefix), err, store.ErrInvalidKey)
	}
	got, err := s.List(ctx, "")
	if err != nil || len(got) != 0 {
		t.Errorf("List after refused writes = %v, %v; want nothing", got, err)
	}
}

func testCanceled(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(ctx, "apps/canceled.json", []byte("x"), store.Condition{}); err == nil {
		t.Fatal("Put with a canceled context succeeded")
	}
	if _, err := s.Get(ctx, "apps/canceled.json"); err == nil {
		t.Fatal("Get with a canceled context succeeded")
	}
	_, err := s.Get(ctxT(t), "apps/canceled.json")
	wantErr(t, "Get after canceled Put", err, store.ErrNotFound)
}

// testConcurrentCAS races Goroutines writers, each landing Increments conditional
// increments of one counter through a read / If-Match write / retry loop. Every value
// 1..total must be written exactly once: a lost update shows as a final count below the
// number of successes, a double win as a value written twice.
func testConcurrentCAS(t *testing.T, s store.Store, opts Options) {
	const key = "counter"
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	total := opts.Goroutines * opts.Increments
	var (
		successes, conflicts atomic.Int64
		mu                   sync.Mutex
		written              = make([]int, total+1) // written[v] = times value v was written
		wg                   sync.WaitGroup
		errs                 = make(chan error, opts.Goroutines)
	)
	start := time.Now()
	for range opts.Goroutines {
		wg.Go(func() {
			for range opts.Increments {
				v, n, err := casIncrement(ctx, s, key)
				conflicts.Add(int64(n))
				if err != nil {
					errs <- err
					return
				}
				successes.Add(1)
				if v < 1 || v > total {
					errs <- fmt.Errorf("wrote %d, outside 1..%d", v, total)
					return
				}
				mu.Lock()
				written[v]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	obj := mustGet(t, s, key)
	final, err := strconv.Atoi(string(obj.Value))
	if err != nil {
		t.Fatalf("counter %q: %v", obj.Value, err)
	}
	if final != int(successes.Load()) || final != total {
		t.Fatalf("final counter = %d, successful increments = %d, want both %d (an update was lost)", final, successes.Load(), total)
	}
	for v := 1; v <= total; v++ {
		if written[v] != 1 {
			t.Fatalf("value %d was written %d times, want exactly once", v, written[v])
		}
	}
	t.Logf("%d goroutines × %d increments: %d conflicts retried, %v", opts.Goroutines, opts.Increments, conflicts.Load(), time.Since(start).Round(time.Millisecond))
}

// casIncrement adds one to the decimal counter at key and returns the value it wrote
// and how many conflicts it retried.
func casIncrement(ctx context.Context, s store.Store, key string) (int, int, error) {
	for attempt := 0; ; attempt++ {
		var cond store.Condition
		n := 0
		obj, err := s.Get(ctx, key)
		switch {
		case err == nil:
			if n, err = strconv.Atoi(string(obj.Value)); err != nil {
				return 0, attempt, fmt.Errorf("counter %q: %w", obj.Value, err)
			}
			cond.IfMatch = obj.ETag
		case errors.Is(err, store.ErrNotFound):
			cond.IfNoneMatch = true
		default:
			return 0, attempt, fmt.Errorf("get: %w", err)
		}
		_, err = s.Put(ctx, key, []byte(strconv.Itoa(n+1)), cond)
		if err == nil {
			return n + 1, attempt, nil
		}
		if !errors.Is(err, store.ErrPreconditionFailed) {
			return 0, attempt, fmt.Errorf("put: %w", err)
		}
		if err := store.Backoff(ctx, attempt); err != nil {
			return 0, attempt, fmt.Errorf("gave up after %d conflicts: %w", attempt+1, err)
		}
	}
}

func testConcurrentBump(t *testing.T, s store.Store, opts Options) {
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	total := opts.Goroutines * opts.Increments
	var (
		mu   sync.Mutex
		got  []uint64
		wg   sync.WaitGroup
		errs = make(chan error, opts.Goroutines)
	)
	for range opts.Goroutines {
		wg.Go(func() {
			for range opts.Increments {
				n, err := store.BumpSerial(ctx, s)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got = append(got, n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(got)
	for i, n := range got {
		if n != uint64(i+1) {
			t.Fatalf("BumpSerial results sorted: position %d is %d, want %d (duplicate or gap)", i, n, i+1)
		}
	}
	serial, etag, err := store.ReadSerial(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if serial != uint64(total) || etag == "" {
		t.Fatalf("ReadSerial = %d (etag %q), want %d", serial, etag, total)
	}
}
