package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type syncBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }
func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

// TestRejectionLogIsRateLimitedPerSource: one line per source per interval; the next
// line counts the rejections not logged.
func TestRejectionLogIsRateLimitedPerSource(t *testing.T) {
	buf := newSyncBuffer()
	now := time.Unix(1000, 0)
	l := newRejectLogger(slog.New(slog.NewTextHandler(buf, nil)), 10*time.Second)
	l.now = func() time.Time { return now }
	for i := 0; i < 50; i++ {
		l.reject("192.0.2.1:4000", "rejected request: bad token")
		l.reject(fmt.Sprintf("192.0.2.2:%d", 4000+i), "rejected request: bad token")
	}
	now = now.Add(11 * time.Second)
	l.reject("192.0.2.1:4001", "rejected request: no bearer token")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[2], "remote=192.0.2.1") || !strings.Contains(lines[2], "notLogged=49") {
		t.Errorf("the line after the interval: %s, want notLogged=49 for 192.0.2.1", lines[2])
	}
	if strings.Contains(lines[0], "notLogged") {
		t.Errorf("first line: %s", lines[0])
	}
}
