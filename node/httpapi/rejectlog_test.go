package httpapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRejectionLogIsRateLimitedPerSource: one line per source per interval, an IPv6
// source being its /64 (sourceKey: 50 addresses of one /64 log one line, not 50); the
// next line counts the rejections not logged.
func TestRejectionLogIsRateLimitedPerSource(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	l := newRejectLogger(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second)
	l.now = func() time.Time { return now }
	for i := 0; i < 50; i++ {
		l.reject("192.0.2.1:4000", "rejected request: bad token")
		l.reject(fmt.Sprintf("192.0.2.2:%d", 4000+i), "rejected request: bad token")
		l.reject(fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1), "rejected request: bad token")
	}
	now = now.Add(11 * time.Second)
	l.reject("192.0.2.1:4001", "rejected request: no bearer token")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4 (192.0.2.1, 192.0.2.2, 2001:db8:1:2::/64, then 192.0.2.1 again):\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[3], "remote=192.0.2.1") || !strings.Contains(lines[3], "notLogged=49") {
		t.Errorf("the line after the interval: %s, want notLogged=49 for 192.0.2.1", lines[3])
	}
	if strings.Contains(lines[0], "notLogged") {
		t.Errorf("first line: %s", lines[0])
	}
}
