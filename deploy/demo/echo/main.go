// Command echo is the demo's upstream application: it answers every request with its
// name and the path it was asked for ("tito-go@a /paulca/events"), so a curl through
// Traefik shows which application, on which node, served it. GET /healthz answers "ok".
//
//	echo -name tito-go@a -listen 127.0.0.2:24001
//
// It is also the example of an application that restarts in place without losing a
// request (docs/operating.md, "Deploys that lose nothing"):
//
//   - Socket activation: started by systemd with a socket unit (deploy/app/app@.socket),
//     it serves the listening socket systemd passed (LISTEN_FDS=1, LISTEN_PID its own
//     pid: descriptor 3) instead of listening on -listen. systemd keeps that socket open
//     while the service restarts, so connections queue in its backlog and the next
//     release accepts them. See listener.
//   - Graceful stop: on SIGTERM (or SIGINT) it is a lame duck for -lame-duck, or until a
//     second signal: it still serves, but every answer carries Connection: close, so a
//     proxy stops reusing its keep-alive connections to it (each closes after its next
//     answer). Then, on a socket it listened itself, it gates and drains it
//     (internal/listengate: the kernel drops new connection attempts, which the client
//     sends again about a second later, to the next release or to a refusal a proxy
//     retries, while echo still accepts until its accept queue is empty, up to five
//     seconds), so closing the socket resets no connection a proxy already wrote a
//     request on. A socket systemd passed is never gated: it stays
//     open, and what queues on it is for the next release. Then it stops accepting,
//     waits (up to a second without progress, ten in all) for the connections it
//     accepted to send their requests, finishes the requests in flight
//     (http.Server.Shutdown), and exits 0. Not
//     http.Server.SetKeepAlivesEnabled(false) for the lame duck: that closes every idle
//     connection at once, and a request a proxy writes on one as it closes is lost (the
//     proxy rightly never resends it). Shutdown closes only this process's descriptor of
//     the socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scafo/ingress/internal/listengate"
)

func main() {
	name := flag.String("name", "echo", "the name every answer starts with")
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on (ignored when systemd passes a socket: LISTEN_FDS)")
	lameDuck := flag.Duration("lame-duck", 200*time.Millisecond, "on SIGTERM, how long to answer with keep-alives off before closing")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s\n", *name, r.URL.Path)
	})
	ln, passed, err := listener(*listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("echo: %s serving on %s", *name, ln.Addr())
	var lame, stopping atomic.Bool
	// The connections waiting for a request (new or idle); none is closed when the
	// last of them leaves while the stop waits for it.
	var (
		waitMu  sync.Mutex
		waiting = map[net.Conn]bool{}
		none    chan struct{}
		left    = make(chan struct{}, 1) // a connection left the wait
	)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, ConnState: func(c net.Conn, st http.ConnState) {
		waitMu.Lock()
		defer waitMu.Unlock()
		if st == http.StateNew || st == http.StateIdle {
			waiting[c] = true
			return
		}
		if waiting[c] {
			delete(waiting, c)
			select {
			case left <- struct{}{}:
			default:
			}
		}
		if len(waiting) == 0 && none != nil {
			close(none)
			none = nil
		}
	}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lame.Load() {
			w.Header().Set("Connection", "close") // net/http closes the connection after this answer
		}
		mux.ServeHTTP(w, r)
	})}
	stopped, served := make(chan struct{}), make(chan struct{})
	// Before serving: a SIGTERM that arrives once the first answer went out must find
	// the handler in place (in the goroutine below, it could still kill the process).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-sig
		lame.Store(true)
		lameDuckOver := time.NewTimer(*lameDuck)
		select {
		case <-lameDuckOver.C:
		case <-sig: // a second signal ends the lame duck early; the stop goes on as below
			lameDuckOver.Stop()
		}
		if !passed {
			// Our own socket: let nothing wait in its accept queue when it closes (a
			// connection waiting there is reset at close, after the proxy wrote its
			// request). Serve keeps accepting meanwhile.
			// The bound only matters when accepting is slow (a loaded machine): Drain
			// returns as soon as the queue is empty.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := listengate.Drain(ctx, ln); err != nil {
				log.Printf("echo: draining the accept queue: %v", err)
			}
			cancel()
		}
		// Stop accepting first (on a passed socket this closes only our descriptor:
		// connections keep queuing for the next release), and let every connection
		// accepted so far send its request: Shutdown would drop a first request it reads
		// after it began (net/http), and close an idle one under a writing client.
		stopping.Store(true)
		_ = ln.Close()
		<-served
		waitMu.Lock()
		var empty chan struct{}
		if len(waiting) > 0 {
			empty = make(chan struct{})
			none = empty
		}
		waitMu.Unlock()
		// A second at most without progress: an idle keep-alive connection may never
		// send again, but while connections keep leaving the wait (requests being read
		// on a loaded machine) each gets another second, ten in all.
		giveUp := time.After(10 * time.Second)
		for empty != nil {
			select {
			case <-empty:
				empty = nil
			case <-left:
			case <-time.After(time.Second):
				empty = nil
			case <-giveUp:
				empty = nil
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			log.Printf("echo: stopping: %v", err)
		}
		close(stopped)
	}()
	if err := srv.Serve(ln); !stopping.Load() && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	close(served)
	<-stopped
}

// listener is the socket to serve: the one systemd passed (passed), or a new one on
// listen (listengate.Listen: a socket the gate works on).
//
// systemd's protocol (sd_listen_fds(3)): LISTEN_PID is the pid the sockets are meant for
// (a child that inherited the variables is not it) and LISTEN_FDS how many there are, from
// descriptor 3 on. This application takes exactly one. It unsets the variables, so a
// process it starts does not take the socket too.
func listener(listen string) (ln net.Listener, passed bool, err error) {
	fds, pid := os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_PID")
	if fds == "" || pid != strconv.Itoa(os.Getpid()) {
		ln, err := listengate.Listen("tcp", listen)
		return ln, false, err
	}
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDNAMES")
	if fds != "1" {
		return nil, false, fmt.Errorf("LISTEN_FDS=%s: want exactly one socket (one ListenStream= in the socket unit)", fds)
	}
	f := os.NewFile(3, "LISTEN_FDS")
	defer f.Close() // FileListener holds its own descriptor of the socket
	ln, err = net.FileListener(f)
	if err != nil {
		return nil, false, fmt.Errorf("LISTEN_FDS: descriptor 3 is not a listening socket: %w", err)
	}
	return ln, true, nil
}
