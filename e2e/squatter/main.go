// Command squatter is the e2e suite's hostile local process (e2e/systemd_test.go): run
// as an unprivileged user on a node's machine, it tries to take the node's port and
// prints what it received; run beside it, it counts what a client of the port sees.
//
//	squatter squat -for 20s 127.0.0.1:7400 [::]:7400 …   bind any address it can, for the
//	                                                      duration (or until SIGTERM);
//	                                                      print "bound <addr>" and,
//	                                                      for every request it receives, its
//	                                                      Authorization header ("token …")
//	squatter probe -for 20s http://127.0.0.1:7400/v1/healthz
//	                                                      GET it in a loop until SIGTERM (or
//	                                                      the duration); print the counts
//	                                                      "ok N refused N failed N"
//
// Both print "started" once running, so the test can wait on it.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: squatter squat|probe -for D ARGS…")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	d := fs.Duration("for", 20*time.Second, "how long")
	fs.Parse(os.Args[2:])
	var out sync.Mutex
	say := func(format string, a ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	end := time.Now().Add(*d)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		stopped.Store(true)
	}()
	switch os.Args[1] {
	case "squat":
		say("started")
		squat(fs.Args(), end, say)
	case "probe":
		say("started")
		probe(fs.Arg(0), end, say)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

// squat loops on bind(2) for every address until end; a socket it gets is served: every
// request's Authorization header is printed.
// stopped is set on SIGTERM.
var stopped atomic.Bool

func over(end time.Time) bool { return stopped.Load() || !time.Now().Before(end) }

func squat(addrs []string, end time.Time, say func(string, ...any)) {
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !over(end) {
				ln, err := net.Listen("tcp", a)
				if err != nil {
					time.Sleep(100 * time.Microsecond) // EADDRINUSE: again, as an attacker would
					continue
				}
				say("bound %s", a)
				go serve(ln, say)
				for !over(end) {
					time.Sleep(10 * time.Millisecond)
				}
				ln.Close()
				return
			}
		}()
	}
	wg.Wait()
}

func serve(ln net.Listener, say func(string, ...any)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					say("conn without a request from %s", c.RemoteAddr())
					return
				}
				line = strings.TrimSpace(line)
				if line == "" {
					break
				}
				if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Authorization") {
					say("token %s", strings.TrimSpace(v))
				}
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}()
	}
}

// probe GETs url on fresh connections until end and prints the counts: ok (any HTTP
// answer), refused (ECONNREFUSED), failed (anything else).
func probe(url string, end time.Time, say func(string, ...any)) {
	var ok, refused, failed int
	tr := &http.Transport{DisableKeepAlives: true}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for !over(end) {
		resp, err := c.Get(url)
		switch {
		case err == nil:
			resp.Body.Close()
			ok++
		case errors.Is(err, syscall.ECONNREFUSED):
			refused++
			say("refused: %v", err)
		default:
			failed++
			say("failed: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	say("ok %d refused %d failed %d", ok, refused, failed)
}
