package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The "serve" child is a minimal Go HTTP server for the same bytes, to split the gap
// between the node and nginx into the node's own work and the I/O technique:
//
//   - mode "bytes": the body is held in memory and written with ResponseWriter.Write,
//     as the node does;
//   - mode "sendfile": the body is a file, opened per request and copied with io.Copy,
//     which net/http turns into sendfile(2), as nginx does.
//
// Both send the gzip file to clients that accept gzip.
const (
	serveModeBytes    = "bytes"
	serveModeSendfile = "sendfile"
)

func runServeChild() int {
	dir, mode, listen := os.Getenv("SCAFO_BENCH_SERVE_DIR"), os.Getenv("SCAFO_BENCH_SERVE_MODE"), os.Getenv("SCAFO_BENCH_SERVE_ADDR")
	plainPath, gzPath := filepath.Join(dir, "traefik.json"), filepath.Join(dir, "traefik.json.gz")
	plain, err1 := os.ReadFile(plainPath)
	gz, err2 := os.ReadFile(gzPath)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(os.Stderr, "serve child: reading %s: %v %v\n", dir, err1, err2)
		return 1
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gzip := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
		body, path := plain, plainPath
		w.Header().Set("Content-Type", "application/json")
		if gzip {
			body, path = gz, gzPath
			w.Header().Set("Content-Encoding", "gzip")
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		switch mode {
		case serveModeBytes:
			w.Write(body)
		case serveModeSendfile:
			f, err := os.Open(path)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			defer f.Close()
			io.Copy(w, f)
		}
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "serve child: %v\n", err)
		return 1
	}
	fmt.Println("listening")
	if err := http.Serve(ln, h); err != nil {
		fmt.Fprintf(os.Stderr, "serve child: %v\n", err)
		return 1
	}
	return 0
}

// startGoServer runs the serve child on the files in dir (written by startStaticNginx
// or by the caller) and returns its port once the child has logged that it listens.
func startGoServer(t *task, mode, dir string) int {
	port := freePort(t)
	p := newProc(t, "go-server-"+mode, self())
	p.Env = append(p.Env, childEnv+"=serve", "SCAFO_BENCH_SERVE_DIR="+dir,
		"SCAFO_BENCH_SERVE_MODE="+mode, "SCAFO_BENCH_SERVE_ADDR="+addr(port))
	p.MustStart(t)
	if err := p.WaitLog(10*time.Second, 0, "listening"); err != nil {
		t.Fatalf("go server (%s): %v", mode, err)
	}
	return port
}
