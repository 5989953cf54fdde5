package httpapi

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestExpiringSetForgetsAfterItsTTL: a member reads as present until ttl after it was
// added (the clock driven by the test), and the least recently added one is dropped
// beyond the size.
func TestExpiringSetForgetsAfterItsTTL(t *testing.T) {
	now := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	s := newExpiringSet(2, time.Minute, func() time.Time { return now })
	s.Add("a")
	now = now.Add(59 * time.Second)
	if !s.Contains("a") {
		t.Fatal("a member 59s old of a 1m set is absent")
	}
	now = now.Add(time.Second)
	if s.Contains("a") {
		t.Fatal("a member 1m old of a 1m set is present")
	}
	s.Add("b")
	s.Add("c")
	s.Add("d")
	if s.Contains("b") || !s.Contains("c") || !s.Contains("d") {
		t.Fatalf("beyond size 2: b %v c %v d %v, want the oldest dropped", s.Contains("b"), s.Contains("c"), s.Contains("d"))
	}
}

// TestAPIStartsNoGoroutine: building an API starts no goroutine (golang-lru's
// expirable.LRU, which the bad-token cache used, starts a cleaner per cache that never
// stops: a node started and stopped in a process left two behind, each test node too).
func TestAPIStartsNoGoroutine(t *testing.T) {
	// One API first: anything a package starts once, on first use, is not per API.
	first := testAPI(t, Config{NodeName: "vps-first", WriteRate: 1, WriteBurst: 1}, Deps{})
	before := runtime.NumGoroutine()
	apis := make([]*API, 50)
	for i := range apis {
		apis[i] = testAPI(t, Config{NodeName: fmt.Sprint("vps-", i), WriteRate: 1, WriteBurst: 1}, Deps{})
	}
	// Other tests' leftovers may end meanwhile, and a few may start one (a timer's
	// AfterFunc firing, a late connection to a stopped test server: seen once, +1 on a
	// loaded machine); an API that starts one is at least one per API.
	if after := runtime.NumGoroutine(); after-before >= len(apis) {
		t.Fatalf("%d APIs built: %d goroutines, %d before: at least one per API", len(apis), after, before)
	}
	runtime.KeepAlive(apis)
	runtime.KeepAlive(first)
}
