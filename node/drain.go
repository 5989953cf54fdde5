package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/scafo/ingress/internal/listengate"
)

// drainBudget bounds what a stop gives, before Shutdown, to the connections queued on
// the API's socket and to the first request of each connection accepted (drainSocket).
const drainBudget = time.Second

// freshConns are the API's accepted connections that have not sent their first request
// yet (http.StateNew): Shutdown drops a request it reads after it began (net/http answers
// nothing and closes), so a stop waits for them first.
type freshConns struct {
	mu sync.Mutex
	m  map[net.Conn]struct{}
}

// track is the http.Server's ConnState.
func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st == http.StateNew {
		if f.m == nil {
			f.m = map[net.Conn]struct{}{}
		}
		f.m[c] = struct{}{}
	} else {
		delete(f.m, c)
	}
}

func (f *freshConns) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// heldSocket is a listening socket another process keeps open across this one's stop
// (systemd socket activation: internal/systemd.Listener).
type heldSocket interface{ Held() bool }

// drainSocket is the stop's first step, while Serve still accepts: gate raw, the API's
// listening socket, and let Serve accept everything its accept queue holds
// (listengate.Drain: a connection left there is reset when the socket closes, after its
// client wrote a request), then close ln (what Serve accepts from) and wait for Serve to
// return (served), then wait until every accepted connection sent its first request;
// drainBudget in all. New connection attempts are dropped meanwhile (their SYN: the
// client sends it again about a second later and is refused, or reaches the next run).
// A listener the gate cannot work on (not from listengate.Listen) is only waited on,
// and one the service manager holds (heldSocket) is neither gated nor drained: closing
// this process's descriptor leaves the socket listening, its queue for the next run.
//
// Why wait for Serve: a connection Serve took from the socket is in fresh only once
// Serve ran its StateNew hook, just before it accepts again. An empty accept queue and
// an empty fresh do not tell that none is in between; a returned Serve does, and a
// request read on such a connection after Shutdown began is dropped unanswered.
func (s *Server) drainSocket(raw, ln net.Listener, served <-chan error, fresh *freshConns) {
	ctx, cancel := context.WithTimeout(context.Background(), drainBudget)
	defer cancel()
	if h, ok := raw.(heldSocket); ok && h.Held() {
		// The service manager keeps this socket open for the next run (internal/systemd):
		// what its queue holds is that run's to accept, and a gate would stay on it.
		s.log.Debug("not draining the API's socket: the service manager holds it for the next run")
	} else if err := listengate.Drain(ctx, raw); errors.Is(err, listengate.ErrUnsupported) {
		s.log.Debug("not draining the API's socket", "err", err)
	} else if err != nil {
		s.log.Warn("draining the API's socket", "err", err)
	}
	// Not bounded by ctx, which a drain that timed out used up: Shutdown would close the
	// listener again under a Serve not yet returned, and fail on that. Serve returns at
	// once on a closed listener; the bound is only a safeguard.
	ln.Close()
	select {
	case err := <-served:
		if !errors.Is(err, net.ErrClosed) {
			s.log.Warn("serving the API", "err", err)
		}
	case <-time.After(drainBudget):
		s.log.Warn("the API's server still accepts after its listener closed")
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for fresh.len() > 0 {
		select {
		case <-ctx.Done():
			s.log.Warn("stopping with connections that sent no request yet", "conns", fresh.len())
			return
		case <-t.C:
		}
	}
}
