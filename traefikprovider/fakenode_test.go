package traefikprovider

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/scafo/ingress/internal/fakenode"
)

// The node the provider polls is internal/fakenode's, shared with the other followers'
// tests; these names keep the tests' sentences short.
const testToken = fakenode.Token

type fakeNode = fakenode.Node

const (
	modeDraining  = fakenode.Draining
	modeBroken    = fakenode.Broken
	modeHang      = fakenode.Hang
	modeStatus500 = fakenode.Status500
	modeTruncated = fakenode.Truncated
	modeRaw       = fakenode.Raw
)

var (
	newFakeNode = fakenode.New
	etagOf      = fakenode.ETagOf
	revisionOf  = fakenode.RevisionOf
)

// closedURL returns the URL of a server that is no longer listening.
func closedURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

// routerConfig returns a small dynamic configuration routing host to backend.
func routerConfig(host, backend string) string {
	cfg := map[string]any{"http": map[string]any{
		"routers": map[string]any{"r": map[string]any{"rule": "Host(`" + host + "`)", "service": "s"}},
		"services": map[string]any{"s": map[string]any{
			"loadBalancer": map[string]any{"servers": []any{map[string]any{"url": backend}}},
		}},
	}}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// logBuf collects a provider's log lines.
type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) add(warn bool, line string) {
	level := "DEBUG"
	if warn {
		level = "WARN"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, level+" "+line)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// count returns how many lines contain s.
func (l *logBuf) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			c++
		}
	}
	return c
}
