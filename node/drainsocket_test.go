package node

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/listengate"
)

// closeSignal is a listener that reports its Close.
type closeSignal struct {
	net.Listener
	closed chan struct{}
}

func (l *closeSignal) Close() error {
	close(l.closed)
	return l.Listener.Close()
}

// drainSocket waits for Serve to return even when the drain used up its budget (nobody
// accepted what queued): otherwise Shutdown could close the listener a second time while
// Serve still holds it, and Run would return that close's error ("use of closed network
// connection") for a clean stop.
func TestDrainSocketWaitsForServeAfterAnExpiredDrain(t *testing.T) {
	tcp, err := listengate.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", tcp.Addr().String(), 10*time.Second) // queued, never accepted
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ln := &closeSignal{Listener: tcp, closed: make(chan struct{})}
	served := make(chan error) // unbuffered: taken only by a drainSocket that waits
	taken := make(chan struct{})
	go func() { // a Serve that returns a moment after its listener closed
		<-ln.closed
		time.Sleep(100 * time.Millisecond)
		select {
		case served <- net.ErrClosed:
			close(taken)
		case <-time.After(5 * time.Second):
		}
	}()
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.drainSocket(tcp, ln, served, &freshConns{})
	select {
	case <-taken:
	case <-time.After(2 * time.Second):
		t.Fatal("drainSocket returned without waiting for Serve to return")
	}
}
