package node_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/listengate"
)

// slowHandOff is a listener whose Accept, once armed, holds the connection it took from
// the socket until the listener is closed (the stop has begun) before handing it over:
// the Serve goroutine descheduled between accept(2) and the StateNew hook (a busy
// machine), made deterministic.
type slowHandOff struct {
	net.Listener
	armed     atomic.Bool
	accepted  chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *slowHandOff) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil && l.armed.Load() {
		l.accepted <- struct{}{}
		<-l.closed
	}
	return c, err
}

func (l *slowHandOff) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// A connection the node took from its socket just before the stop, but had not yet handed
// to the HTTP server (no StateNew yet, so not among the fresh connections), is answered,
// not closed unanswered: the stop closes the listener and waits for Serve to return
// before it counts the connections still waiting for their first request. Before, the
// stop saw no fresh connection, began Shutdown at once, and net/http dropped the request
// it then read on that connection (EOF for the client).
func TestStopAnswersAConnectionAcceptedAsItBegins(t *testing.T) {
	cfg := testConfig(t, "vps-a", t.TempDir())
	st := openDir(t, cfg.Store.Dir.Path)
	tcp, err := listengate.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &slowHandOff{Listener: tcp, accepted: make(chan struct{}, 1), closed: make(chan struct{})}
	n := startNodeOn(t, cfg, st, ln)
	n.WaitReady()
	http.DefaultClient.CloseIdleConnections()

	ln.armed.Store(true)
	c, err := net.DialTimeout("tcp", tcp.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ln.accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not accept the connection")
	}
	n.Cancel() // the stop; n.stop at cleanup then only waits for what has returned
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Errorf("the request on a connection accepted as the stop began: %v, want an answer", err)
	} else {
		resp.Body.Close()
	}
	select {
	case <-n.Exited():
		if err := n.Err(); err != nil {
			t.Errorf("Run: %v, want nil (the stop's own close of the listener is no error)", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the node did not stop within 15 s")
	}
	if logs := n.Logs.String(); strings.Contains(logs, "serving the API") || strings.Contains(logs, "sent no request yet") {
		t.Errorf("the stop warned: %s", logs)
	}
}
