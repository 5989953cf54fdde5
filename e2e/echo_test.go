package e2e

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// echoReply is what every upstream answers, for every request.
type echoReply struct {
	Name    string `json:"name"`
	Path    string `json:"path"`    // r.URL.Path (decoded)
	RawPath string `json:"rawPath"` // r.RequestURI, exactly as received from Traefik
	Host    string `json:"host"`
}

// echo is an upstream application instance bound to one loopback address. It can be
// stopped (its port then refuses connections) and started again on the same port.
type echo struct {
	name string
	ip   string
	port int
	// delay: every answer waits this long; failPath: a request for it answers 500.
	delay    time.Duration
	failPath string

	mu   sync.Mutex
	srv  *http.Server
	seen []echoReply
}

// startEcho starts an echo server named name on ip:port (port 0: any free port).
func startEcho(t *testing.T, name, ip string, port int) *echo {
	t.Helper()
	e := &echo{name: name, ip: ip, port: port}
	e.start(t)
	t.Cleanup(e.stop)
	return e
}

func (e *echo) addr() string { return hostPort(e.ip, e.port) }

func (e *echo) start(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		return
	}
	var l net.Listener
	// A port just closed by stop can linger for a moment; retry briefly.
	err := poll(5*time.Second, 50*time.Millisecond, func() error {
		var err error
		l, err = net.Listen("tcp", hostPort(e.ip, e.port))
		return err
	})
	if err != nil {
		t.Fatalf("echo %s: listening on %s: %v", e.name, hostPort(e.ip, e.port), err)
	}
	e.port = l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("echo %s: %v", e.name, err)
		}
	}()
	e.srv = srv
}

// stop closes the listener and every open connection: the port refuses connections,
// exactly as when the instance's process dies.
func (e *echo) stop() {
	e.mu.Lock()
	srv := e.srv
	e.srv = nil
	e.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (e *echo) serve(w http.ResponseWriter, r *http.Request) {
	if e.delay > 0 {
		select {
		case <-time.After(e.delay):
		case <-r.Context().Done():
			return
		}
	}
	rep := echoReply{Name: e.name, Path: r.URL.Path, RawPath: r.RequestURI, Host: r.Host}
	e.mu.Lock()
	e.seen = append(e.seen, rep)
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if e.failPath != "" && r.URL.Path == e.failPath {
		w.WriteHeader(http.StatusInternalServerError)
	}
	_ = json.NewEncoder(w).Encode(rep)
}

// requests returns every request this instance has answered.
func (e *echo) requests() []echoReply {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]echoReply(nil), e.seen...)
}
