package s3

import (
	"maps"
	"net"
	"net/http"
	"sync"
	"time"
)

var netDialer = net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}

// Stats counts the HTTP requests a Store sent, retries included, so tests and metrics
// can see what a reconcile tick costs.
type Stats struct {
	// Requests is every request sent.
	Requests int64
	// ByMethod splits Requests by HTTP method (GET, PUT, HEAD, DELETE…).
	ByMethod map[string]int64
	// NotModified counts 304 answers (conditional reads that moved no body).
	NotModified int64
	// Failed counts requests that got no answer or a 5xx.
	Failed int64
}

// Sub returns the requests counted in s since the snapshot before.
func (s Stats) Sub(before Stats) Stats {
	d := Stats{
		Requests:    s.Requests - before.Requests,
		NotModified: s.NotModified - before.NotModified,
		Failed:      s.Failed - before.Failed,
		ByMethod:    map[string]int64{},
	}
	for m, n := range s.ByMethod {
		if n -= before.ByMethod[m]; n != 0 {
			d.ByMethod[m] = n
		}
	}
	return d
}

// Stats returns a snapshot of the request counters.
func (s *Store) Stats() Stats { return s.stats.snapshot() }

// counter is an http.RoundTripper that counts requests.
type counter struct {
	next http.RoundTripper

	mu sync.Mutex
	s  Stats
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Requests++
	if c.s.ByMethod == nil {
		c.s.ByMethod = map[string]int64{}
	}
	c.s.ByMethod[req.Method]++
	switch {
	case err != nil || resp.StatusCode >= 500:
		c.s.Failed++
	case resp.StatusCode == http.StatusNotModified:
		c.s.NotModified++
	}
	return resp, err
}

func (c *counter) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	s.ByMethod = maps.Clone(c.s.ByMethod)
	if s.ByMethod == nil {
		s.ByMethod = map[string]int64{}
	}
	return s
}
