package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
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
// or by the caller) and returns its port.
func startGoServer(t *testing.T, mode, dir string) int {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=serve", "SCAFO_BENCH_SERVE_DIR="+dir,
		"SCAFO_BENCH_SERVE_MODE="+mode, "SCAFO_BENCH_SERVE_ADDR="+addr(port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "listening" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
		io.Copy(io.Discard, out)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("go server (%s): %v", mode, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("go server (%s) did not start", mode)
	}
	return port
}
