// Package testinst holds the instances the node's tests probe: real listeners on
// 127.0.0.1 that a test opens, closes and inspects. It is imported by tests only
// (node and node/probe), so the two packages' probe tests share one definition.
package testinst

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// TCP is a real listener on 127.0.0.1 that accepts and closes connections, counting
// them; it can be closed and reopened on its port.
type TCP struct {
	Port    int
	Accepts atomic.Int64

	t  *testing.T
	mu sync.Mutex
	ln net.Listener
}

// StartTCP opens a TCP instance on a free port; the test's cleanup closes it.
func StartTCP(t *testing.T) *TCP {
	t.Helper()
	i := &TCP{t: t}
	i.Open()
	t.Cleanup(i.Close)
	return i
}

// Open listens on the instance's port (a free one the first time).
func (i *TCP) Open() {
	i.t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(i.Port)))
	if err != nil {
		i.t.Fatal(err)
	}
	i.Port = ln.Addr().(*net.TCPAddr).Port
	i.mu.Lock()
	i.ln = ln
	i.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			i.Accepts.Add(1)
			c.Close()
		}
	}()
}

// Close stops listening: the port refuses until Open.
func (i *TCP) Close() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.ln != nil {
		i.ln.Close()
		i.ln = nil
	}
}

// Health is an HTTP instance on 127.0.0.1 whose health path answers Code (or
// redirects), recording the hits and the last request's headers.
type Health struct {
	Code   atomic.Int64
	Hits   atomic.Int64
	Header atomic.Pointer[http.Header]
	Port   int

	srv *http.Server
}

// StartHealth serves path on a free port, answering code, or a 302 to redirect when
// that is set; any other path is 404. The test's cleanup closes it.
func StartHealth(t *testing.T, path string, code int, redirect string) *Health {
	t.Helper()
	h := &Health{}
	h.Code.Store(int64(code))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.Port = ln.Addr().(*net.TCPAddr).Port
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		h.Hits.Add(1)
		hdr := r.Header.Clone()
		h.Header.Store(&hdr)
		if redirect != "" {
			http.Redirect(w, r, redirect, http.StatusFound)
			return
		}
		w.WriteHeader(int(h.Code.Load()))
	})}
	go h.srv.Serve(ln)
	t.Cleanup(func() { h.srv.Close() })
	return h
}
