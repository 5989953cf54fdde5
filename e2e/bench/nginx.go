package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scafo/ingress/internal/proc"
)

// nginx is one private nginx: its own configuration, pid file, logs and temp dirs
// under a temp dir, listening on 127.0.0.1 only, run in the foreground (daemon off) so
// that its master is our child and is stopped by its PID.
type nginx struct {
	port   int
	ports  []int // every listener, when there are several
	prefix string
	proc   *proc.Proc
}

// nginxConfig is the skeleton every bench nginx shares; server is the server block.
func nginxConfig(prefix string, workers int, server string) string {
	user := ""
	if os.Geteuid() == 0 {
		// The workers must read files in our 0700 temp dirs.
		user = "user root root;\n"
	}
	return fmt.Sprintf(`%sdaemon off;
master_process on;
worker_processes %d;
worker_rlimit_nofile 19990;
pid %[3]s/nginx.pid;
error_log %[3]s/error.log warn;
events { worker_connections 19000; }
http {
  access_log off;
  client_body_temp_path %[3]s/tmp/body;
  proxy_temp_path %[3]s/tmp/proxy;
  fastcgi_temp_path %[3]s/tmp/fastcgi;
  uwsgi_temp_path %[3]s/tmp/uwsgi;
  scgi_temp_path %[3]s/tmp/scgi;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 65;
  keepalive_requests 100000000;
  default_type application/json;
  log_format hc '$msec $uri';
%s
}
`, user, workers, prefix, server)
}

// startNginx writes the configuration and runs nginx, waiting until probe answers 200.
func startNginx(t *task, name string, workers int, server func(prefix string, port int) string, probe string) *nginx {
	prefix := t.TempDir()
	if err := os.MkdirAll(filepath.Join(prefix, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &nginx{port: freePort(t), prefix: prefix}
	conf := filepath.Join(prefix, "nginx.conf")
	mustWrite(t, conf, []byte(nginxConfig(prefix, workers, server(prefix, n.port))))
	// -e: the error log before the configuration is read (else /var/log/nginx).
	n.proc = newProc(t, name, bins.nginx, "-p", prefix, "-c", conf, "-e", filepath.Join(prefix, "error.log"))
	// SIGTERM if the report program dies: the master then stops its workers, which
	// SIGKILL would orphan.
	n.proc.DeathSignal = syscall.SIGTERM
	n.proc.MustStart(t)
	const limit = 10 * time.Second
	if err := n.proc.WaitUntil(limit, func() error { return proc.HTTPOK(nil, "http://"+addr(n.port)+probe) }); err != nil {
		b, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
		t.Fatalf("waiting %s for %s answering: %v\nerror.log:\n%s", limit, name, err, b)
	}
	return n
}

// startStaticNginx serves plain at /traefik.json, and gz (the same body, gzipped:
// the node's own gzip bytes) to clients that accept gzip (gzip_static).
func startStaticNginx(t *task, plain, gz []byte) *nginx {
	var www string
	n := startNginx(t, "nginx-static", 2, func(prefix string, port int) string {
		www = filepath.Join(prefix, "www")
		if err := os.MkdirAll(www, 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(www, "traefik.json"), plain)
		mustWrite(t, filepath.Join(www, "traefik.json.gz"), gz)
		return fmt.Sprintf(`  server {
    listen 127.0.0.1:%d;
    root %s;
    location / { gzip_static on; }
  }`, port, www)
	}, "/traefik.json")
	return n
}

// backendPorts is how many listeners the backend spreads the leaves over: one listen
// queue (somaxconn, 4096 here) cannot take a burst of 10 000 health-check connections,
// while in production every leaf is its own server.
const backendPorts = 8

// startBackend runs the upstream every Traefik route points at: 200 "ok" for
// everything, on backendPorts listeners, and one access-log line per health-check
// request in hc.log. n.ports lists the listeners (n.port is the first).
func startBackend(t *task) *nginx {
	var ports []int
	n := startNginx(t, "nginx-backend", 2, func(prefix string, port int) string {
		hc := filepath.Join(prefix, "hc.log")
		ports = []int{port}
		for len(ports) < backendPorts {
			ports = append(ports, freePort(t))
		}
		var listen strings.Builder
		for _, p := range ports {
			fmt.Fprintf(&listen, "    listen 127.0.0.1:%d backlog=4096;\n", p)
		}
		return fmt.Sprintf(`  server {
%s    location = /healthz { access_log %[2]s hc; return 200 "ok\n"; }
    location = /v1/healthz { access_log %[2]s hc; return 200 "ok\n"; }
    location /v1/health/instances/ { access_log %[2]s hc; return 200 "ok\n"; }
    location / { return 200 "ok\n"; }
  }`, listen.String(), hc)
	}, "/")
	n.ports = ports
	return n
}

// healthLoad is the health-check traffic the backend saw in one window.
type healthLoad struct {
	expected   float64 // leaves ÷ interval
	perSec     float64 // measured average
	peakSecond int     // most checks logged within one wall-clock second
}

// healthLoad reads the backend's health-check log ("<unix seconds.millis> <uri>" lines)
// for the window starting at from.
func (n *nginx) healthLoad(t *task, from time.Time, window time.Duration) healthLoad {
	b, err := os.ReadFile(filepath.Join(n.prefix, "hc.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	lo, hi := float64(from.UnixMilli())/1e3, float64(from.Add(window).UnixMilli())/1e3
	perSecond := map[int64]int{}
	total := 0
	for _, line := range strings.Split(string(b), "\n") {
		f, _, _ := strings.Cut(line, " ")
		ts, err := strconv.ParseFloat(f, 64)
		if err != nil || ts < lo || ts >= hi {
			continue
		}
		total++
		perSecond[int64(ts)]++
	}
	h := healthLoad{perSec: float64(total) / window.Seconds()}
	for _, c := range perSecond {
		h.peakSecond = max(h.peakSecond, c)
	}
	return h
}

// startBackendAlt is a second backend for ti.to's own application: it answers its own
// port number, so a response says whether a path router or the host router answered.
// Its health checks are logged like the main backend's.
func startBackendAlt(t *task) *nginx {
	return startNginx(t, "nginx-backend-alt", 1, func(prefix string, port int) string {
		hc := filepath.Join(prefix, "hc.log")
		return fmt.Sprintf(`  server {
    listen 127.0.0.1:%d;
    location = /healthz { access_log %[2]s hc; return 200 "ok\n"; }
    location /v1/health/instances/ { access_log %[2]s hc; return 200 "ok\n"; }
    location / { return 200 "%[1]d\n"; }
  }`, port, hc)
	}, "/")
}
