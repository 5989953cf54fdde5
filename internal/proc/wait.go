package proc

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Tick is how often the waits of this package look again.
const Tick = 10 * time.Millisecond

// Poll calls cond every tick until it returns nil or timeout passes; then it returns
// cond's last error.
func Poll(timeout, tick time.Duration, cond func() error) error {
	return pollUntil(timeout, tick, nil, nil, cond)
}

// WaitFor is Poll at Tick failing t with what and the last error.
func WaitFor(t TB, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, Tick, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// pollUntil is Poll that also ends, with abort's error, as soon as stop is closed.
func pollUntil(timeout, tick time.Duration, stop <-chan struct{}, abort func() error, cond func() error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-stop:
			// One last look: the child may have done its work and then exited.
			if cond() == nil {
				return nil
			}
			return abort()
		case <-deadline.C:
			return err
		case <-ticker.C:
		}
	}
}

// Dial reports whether addr (host:port) accepts a TCP connection now.
func Dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// HTTPOK sends GET url with c (nil: a client with a 5s timeout) and reports whether it
// answered 200.
func HTTPOK(c *http.Client, url string) error {
	if c == nil {
		c = defaultClient
	}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

var defaultClient = &http.Client{Timeout: 5 * time.Second}

// FreePort returns a TCP port free on ip right now. The listener is closed again, so
// another process can take the port before the caller's child binds it: a caller that
// cannot accept that retries on a fresh port when its child fails to bind.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// MustFreePort is FreePort failing t.
func MustFreePort(t TB, ip string) int {
	t.Helper()
	port, err := FreePort(ip)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// WaitBindable waits until addr (host:port) can be listened on again, e.g. after the
// process that held it was killed.
func WaitBindable(timeout time.Duration, addr string) error {
	return Poll(timeout, Tick, func() error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		return l.Close()
	})
}

// HostPort is net.JoinHostPort for a numeric port.
func HostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
