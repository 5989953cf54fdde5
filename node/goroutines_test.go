package node_test

import (
	"runtime"
	"testing"
	"time"
)

// TestANodeStoppedLeavesNoGoroutine: a node started and stopped leaves no goroutine
// behind (the expirable LRU of node/httpapi's bad-token cache left a cleaner per node
// that never stopped). Not parallel: it counts the process's goroutines, and waits for
// the count to come back (a stopped node's last connections close on their own time).
func TestANodeStoppedLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 3 {
		n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
		n.WaitReady()
		n.Must(200, "GET", "/v1/status", testAdminToken, "")
		n.Stop()
	}
	waitFor(t, 20*time.Second, "the goroutines of the stopped nodes to end", func() bool {
		return runtime.NumGoroutine() <= before
	})
}
