package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
)

// Issue 47 item 8 beside a real Traefik on the shipped static configuration, in one
// run, each comparison alternated round by round:
//
//   - HTTPS requests (keep-alive, Traefik's own TLS) through the front and Traefik (the
//     front relays a name it has no passthrough route for to Traefik's internal entry
//     point behind a PROXY v2 header) against Traefik alone: throughput ratio, added
//     p50/p99;
//   - TLS passthrough: new connections per second and bytes per second through the
//     front (straight to the application) against Traefik's own TCP router.
//
// The front runs as its own process (node/front's TCPProxy behind a few lines of main,
// built here); the application, the HTTP backend and the clients are this process.
// Needs a Traefik (TRAEFIK_BIN, or e2e/build-traefik.sh).

const secFront = "11. The layer-4 front beside Traefik (issue 47)"

const (
	frontPassName = "db.example.org"  // the passthrough route
	frontHTTPName = "web.example.org" // an HTTP route Traefik terminates
)

// frontMain is the front process the bench runs: one listener, one passthrough route,
// everything else to the fallback.
const frontMain = `package main

import (
	"flag"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/scafo/ingress/node/front"
)

func main() {
	listen := flag.String("listen", "", "address")
	fallback := flag.String("fallback", "", "address")
	route := flag.String("route", "", "name=host:port")
	flag.Parse()
	name, up, _ := strings.Cut(*route, "=")
	table := front.NewTable([]front.Route{{Name: name, Upstreams: []string{up}}})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	p := front.NewTCPProxy(front.TCPConfig{Fallback: *fallback}, func() *front.Table { return table },
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		p.Close()
	}()
	if err := p.Serve(ln); err != nil {
		log.Fatal(err)
	}
}
`

func frontBesideTraefik(t *task) {
	dir := t.TempDir()

	// The front's binary.
	src := filepath.Join(dir, "frontmain", "main.go")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, src, []byte(frontMain))
	frontBin := filepath.Join(dir, "front")
	build := exec.Command("go", "build", "-o", frontBin, src)
	build.Dir = bins.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the front: %v\n%s", err, out)
	}

	// The application (TLS of its own, echo) and the HTTP backend.
	cert, roots := selfSigned(t, frontPassName)
	app := listenTLSEcho(t, cert)
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = backend.Serve(bl) }()
	t.Cleanup(func() { backend.Close() })

	// Traefik: the shipped static configuration, websecure as clients reach it, and an
	// internal entry point the front relays to (proxyProtocol trusting loopback).
	web, websecure, internal := freePort(t), freePort(t), freePort(t)
	dyn := filepath.Join(dir, "dynamic.yaml")
	mustWrite(t, dyn, []byte(fmt.Sprintf(`http:
  routers:
    web: {entryPoints: [websecure, internal], rule: "Host(%[1]s)", service: web, tls: {}}
  services:
    web: {loadBalancer: {servers: [{url: "http://%[2]s"}]}}
tcp:
  routers:
    db: {entryPoints: [websecure, internal], rule: "HostSNI(%[3]s)", service: db, tls: {passthrough: true}}
  services:
    db: {loadBalancer: {servers: [{address: "%[4]s"}]}}
`, "`"+frontHTTPName+"`", bl.Addr(), "`"+frontPassName+"`", app.Addr())))
	shipped, err := os.ReadFile(shippedConfig)
	if err != nil {
		t.Fatal(err)
	}
	static, err := traefikStatic(shipped, web, websecure, dyn, 0)
	if err != nil {
		t.Fatal(err)
	}
	static, err = withInternalEntryPoint(static, internal)
	if err != nil {
		t.Fatal(err)
	}
	staticFile := filepath.Join(dir, "traefik.yml")
	mustWrite(t, staticFile, static)
	tr := newProc(t, "traefik", bins.traefik, "--configFile="+staticFile)
	tr.MustStart(t)

	frontPort := freePort(t)
	fp := newProc(t, "front", frontBin, "-listen", addr(frontPort), "-fallback", addr(internal),
		"-route", frontPassName+"="+app.Addr().String())
	fp.MustStart(t)

	direct, viaFront := addr(websecure), addr(frontPort)
	https := func() *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext:         (&net.Dialer{}).DialContext,
			TLSClientConfig:     &tls.Config{ServerName: frontHTTPName, InsecureSkipVerify: true},
			MaxIdleConnsPerHost: 64,
		}}
	}
	get := func(c *http.Client, to string) error {
		req, _ := http.NewRequest(http.MethodGet, "https://"+to+"/", nil)
		req.Host = frontHTTPName
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			return fmt.Errorf("%d %q", resp.StatusCode, b)
		}
		return nil
	}
	// Routed both ways (Traefik has read its dynamic file; the front listens).
	for _, to := range []string{direct, viaFront} {
		c := https()
		waitFor(t, "routing through "+to, 30*time.Second, func() error {
			if err := get(c, to); err != nil {
				return err
			}
			s, err := tlsSession(to, roots)
			if err == nil {
				s.Close()
			}
			return err
		})
	}

	rounds := 3
	var httpT, httpF loadResult
	var hsT, hsF, bytesT, bytesF rate
	for r := 0; r < rounds; r++ {
		httpT.add(httpLoad(t, https(), get, direct, 8, 3*time.Second))
		httpF.add(httpLoad(t, https(), get, viaFront, 8, 3*time.Second))
		hsT.add(handshakes(t, direct, roots, 2*time.Second))
		hsF.add(handshakes(t, viaFront, roots, 2*time.Second))
		bytesT.add(echoBytes(t, direct, roots, 2*time.Second))
		bytesF.add(echoBytes(t, viaFront, roots, 2*time.Second))
	}
	p50T, p99T := httpT.pct(0.50), httpT.pct(0.99)
	p50F, p99F := httpF.pct(0.50), httpF.pct(0.99)
	thrRatio := httpF.rps() / httpT.rps()
	rows := []string{
		fmt.Sprintf("%d rounds, alternated; HTTPS: 8 keep-alive connections, 3 s per side per round; passthrough: sequential new TLS connections and a 64 KiB-write echo, 2 s per side per round.", rounds),
		"",
		"| measure | Traefik alone | front + Traefik | ratio / added |",
		"|---|---|---|---|",
		fmt.Sprintf("| HTTPS requests/s (Traefik's TLS) | %.0f | %.0f | %.3f× |", httpT.rps(), httpF.rps(), thrRatio),
		fmt.Sprintf("| HTTPS p50 | %s ms | %s ms | +%s ms |", ms(p50T), ms(p50F), ms(p50F-p50T)),
		fmt.Sprintf("| HTTPS p99 | %s ms | %s ms | +%s ms |", ms(p99T), ms(p99F), ms(p99F-p99T)),
		fmt.Sprintf("| HTTPS errors | %d | %d | |", httpT.errors, httpF.errors),
		"",
		"| passthrough | Traefik's TCP router | the front | front / Traefik |",
		"|---|---|---|---|",
		fmt.Sprintf("| new TLS connections/s | %.0f | %.0f | %.3f× |", hsT.perSecond(), hsF.perSecond(), hsF.perSecond()/hsT.perSecond()),
		fmt.Sprintf("| echoed MB/s (each way) | %.0f | %.0f | %.3f× |", bytesT.perSecond()/1e6, bytesF.perSecond()/1e6, bytesF.perSecond()/bytesT.perSecond()),
	}
	report.add(secFront, rows...)
	report.goal("front + Traefik HTTPS throughput (issue 47)", "≥ 0.95× Traefik alone", fmt.Sprintf("%.3f×", thrRatio), thrRatio >= 0.95, "")
	report.goal("front's added HTTPS p50 (issue 47)", "< 0.2 ms", ms(p50F-p50T)+" ms", p50F-p50T < 200*time.Microsecond, "")
	t.Log("\n" + strings.Join(rows, "\n"))
}

// withInternalEntryPoint adds entry point "internal" on port: websecure's settings, and
// proxyProtocol trusting loopback (where the front connects from).
func withInternalEntryPoint(static []byte, port int) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(static, &cfg); err != nil {
		return nil, err
	}
	eps, _ := cfg["entryPoints"].(map[string]any)
	ws, ok := eps["websecure"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no entryPoints.websecure")
	}
	in := map[string]any{}
	for k, v := range ws {
		in[k] = v
	}
	in["address"] = addr(port)
	in["proxyProtocol"] = map[string]any{"trustedIPs": []string{"127.0.0.1/32"}}
	eps["internal"] = in
	return yaml.Marshal(cfg)
}

func selfSigned(t *task, name string) (tls.Certificate, *x509.CertPool) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, pool
}

// listenTLSEcho is the passthrough application: its own TLS, one line ("hello"), then
// an echo.
func listenTLSEcho(t *task, cert tls.Certificate) net.Listener {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.WriteString(c, "hello\n"); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln
}

// tlsSession makes one verified TLS session for the passthrough name and reads the
// application's line.
func tlsSession(to string, roots *x509.CertPool) (*tls.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", to, &tls.Config{ServerName: frontPassName, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello\n" {
		c.Close()
		return nil, fmt.Errorf("the application's line: %q, %v", line, err)
	}
	return c, nil
}

// loadResult is one side's HTTPS load over the rounds.
type loadResult struct {
	requests, errors int64
	elapsed          time.Duration
	lat              []time.Duration
}

func (l *loadResult) add(o loadResult) {
	l.requests += o.requests
	l.errors += o.errors
	l.elapsed += o.elapsed
	l.lat = append(l.lat, o.lat...)
}

func (l *loadResult) rps() float64 { return float64(l.requests) / l.elapsed.Seconds() }

func (l *loadResult) pct(p float64) time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	s := slices.Clone(l.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func httpLoad(t *task, c *http.Client, get func(*http.Client, string) error, to string, conns int, d time.Duration) loadResult {
	var mu sync.Mutex
	var res loadResult
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var n, errs int64
			for time.Now().Before(end) {
				s := time.Now()
				if err := get(c, to); err != nil {
					errs++
					continue
				}
				lat = append(lat, time.Since(s))
				n++
			}
			mu.Lock()
			res.requests += n
			res.errors += errs
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	c.CloseIdleConnections()
	return res
}

// rate is a count over time, summed over rounds.
type rate struct {
	n       float64
	elapsed time.Duration
}

func (r *rate) add(o rate)         { r.n += o.n; r.elapsed += o.elapsed }
func (r *rate) perSecond() float64 { return r.n / r.elapsed.Seconds() }
func handshakes(t *task, to string, roots *x509.CertPool, d time.Duration) rate {
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		c, err := tlsSession(to, roots)
		if err != nil {
			t.Fatalf("a new passthrough connection through %s: %v", to, err)
		}
		c.Close()
		n++
	}
	return rate{float64(n), time.Since(start)}
}

func echoBytes(t *task, to string, roots *x509.CertPool, d time.Duration) rate {
	c, err := tlsSession(to, roots)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Time{})
	buf := make([]byte, 64<<10)
	var sent atomic.Int64
	stop := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				werr <- nil
				return
			default:
			}
			if _, err := c.Write(buf); err != nil {
				werr <- err
				return
			}
			sent.Add(int64(len(buf)))
		}
	}()
	start := time.Now()
	var got int64
	rb := make([]byte, 64<<10)
	for time.Since(start) < d {
		n, err := c.Read(rb)
		got += int64(n)
		if err != nil {
			t.Fatal(err)
		}
	}
	el := time.Since(start)
	close(stop)
	// Drain what is in flight so the writer's last Write returns.
	go func() { _, _ = io.Copy(io.Discard, c) }()
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	return rate{float64(got), el}
}
