package node

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/scafo/ingress/internal/listengate"
	"github.com/scafo/ingress/internal/systemd"
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
//
// In a synctest bubble: the drain's budget passes on the bubble's clock, and the fake
// Serve returns only once drainSocket is blocked (synctest.Wait), so a drainSocket that
// does not wait for it has returned by then, every time.
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
	synctest.Test(t, func(t *testing.T) {
		ln := &closeSignal{Listener: tcp, closed: make(chan struct{})}
		served := make(chan error) // unbuffered: taken only by a drainSocket that waits
		taken, decided := make(chan struct{}), make(chan struct{})
		go func() { // a Serve that returns once its listener closed and drainSocket is blocked
			defer close(decided)
			<-ln.closed
			synctest.Wait()
			select {
			case served <- net.ErrClosed:
				close(taken)
			default: // nobody waits for Serve
			}
		}()
		s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		s.drainSocket(tcp, ln, served, &freshConns{})
		<-decided
		select {
		case <-taken:
		default:
			t.Fatal("drainSocket returned without waiting for Serve to return")
		}
	})
}

// TestAHeldSocketIsNeitherGatedNorDrainedAtStop: a socket the service manager holds
// (systemd socket activation) outlives this run. The stop closes only its own
// descriptor: a connection queued meanwhile stays in the queue for the next run (not
// reset), and a new one completes its handshake at once (not gated: a gate stays on the
// socket and would drop every SYN the next run is meant to take).
func TestAHeldSocketIsNeitherGatedNorDrainedAtStop(t *testing.T) {
	manager, err := listengate.Listen("tcp", "127.0.0.1:0") // systemd's descriptor
	if err != nil {
		t.Fatal(err)
	}
	defer manager.Close()
	f, err := manager.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	dup, err := net.FileListener(f) // the run's descriptor, as LISTEN_FDS hands it over
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	held := systemd.Listener{Listener: dup}
	queued, err := net.DialTimeout("tcp", manager.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close()
	served := make(chan error, 1)
	served <- net.ErrClosed // a Serve that returned at the close
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.drainSocket(held, held, served, &freshConns{})

	// Not gated: the handshake completes well inside a SYN retransmit (1s).
	fresh, err := net.DialTimeout("tcp", manager.Addr().String(), 500*time.Millisecond)
	if err != nil {
		t.Fatalf("a connection after the stop: %v (the held socket was gated)", err)
	}
	defer fresh.Close()
	// The next run accepts both, the queued one first, and neither was reset.
	for i, c := range []net.Conn{queued, fresh} {
		sc, err := manager.Accept()
		if err != nil {
			t.Fatal(err)
		}
		sc.Write([]byte("next run\n"))
		sc.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 9)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "next run\n" {
			t.Fatalf("connection %d read %q, %v (reset at the stop?)", i, b, err)
		}
	}
}
