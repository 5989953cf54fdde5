// Command traefikcheck runs Traefik's own code over rendered configurations (v3.6.12's
// by default, v3.7.13's built with -tags traefik37: muxer_v36.go, muxer_v37.go):
// the HTTP provider's decoder, encoding/json into Traefik's types with unknown fields
// refused (the plugin provider's decoder, made strict), the service manager building
// every service a router uses (failover health-check wiring included), and the HTTP
// muxer parsing every rule and routing probe requests after the entry point's path
// normalisation, every router's middlewares resolving, the retry middleware built by
// Traefik's retry.New and, once, its behaviour through a real service (retryBehaviour),
// and the TCP muxer parsing every TCP router's rule and routing ClientHello server names
// (SNIProbes) as the entry point hands them over.
// It is built in a throwaway module by TestTraefikDecodesTheRender
// (render/traefik_check_test.go, SCAFO_TRAEFIK_DECODE=1); it is not part of the
// scafo module.
package main

import (
	"bytes"
	"context"
	stdtls "crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/traefik/paerser/file"
	"github.com/traefik/traefik/v3/pkg/config/dynamic"
	"github.com/traefik/traefik/v3/pkg/config/runtime"
	"github.com/traefik/traefik/v3/pkg/middlewares/requestdecorator"
	"github.com/traefik/traefik/v3/pkg/middlewares/retry"
	httpmuxer "github.com/traefik/traefik/v3/pkg/muxer/http"
	"github.com/traefik/traefik/v3/pkg/proxy/httputil"
	"github.com/traefik/traefik/v3/pkg/server/middleware"
	"github.com/traefik/traefik/v3/pkg/server/provider"
	"github.com/traefik/traefik/v3/pkg/server/service"
	"github.com/traefik/traefik/v3/pkg/tcp"
	"github.com/traefik/traefik/v3/pkg/tls"
)

type input struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"config"`
	Probes []probe         `json:"probes"`
	// RetryCheck asks for retryBehaviour with the input's retry middleware.
	RetryCheck bool `json:"retryCheck"`
	// SNIProbes are TLS server names and the TCP router that must take each ("": none).
	SNIProbes []sniProbe `json:"sniProbes"`
}

type sniProbe struct {
	ServerName string `json:"serverName"`
	Want       string `json:"want"`
}

type probe struct {
	Host   string `json:"host"`
	Target string `json:"target"`
	Want   string `json:"want"`
}

func main() {
	var inputs []input
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	if err := json.Unmarshal(data, &inputs); err != nil {
		fail("%v", err)
	}
	failed := false
	for _, in := range inputs {
		for _, msg := range check(in) {
			failed = true
			fmt.Printf("%s: %s\n", in.Name, msg)
		}
	}
	if failed {
		os.Exit(1)
	}
	fmt.Printf("ok: %d configurations (Traefik %s muxers)\n", len(inputs), traefikLine)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

// decodeConfiguration is pkg/provider/http's, verbatim.
func decodeConfiguration(data []byte) (*dynamic.Configuration, error) {
	configuration := &dynamic.Configuration{
		HTTP: &dynamic.HTTPConfiguration{
			Routers:           make(map[string]*dynamic.Router),
			Middlewares:       make(map[string]*dynamic.Middleware),
			Services:          make(map[string]*dynamic.Service),
			ServersTransports: make(map[string]*dynamic.ServersTransport),
		},
		TCP: &dynamic.TCPConfiguration{
			Routers:           make(map[string]*dynamic.TCPRouter),
			Services:          make(map[string]*dynamic.TCPService),
			ServersTransports: make(map[string]*dynamic.TCPServersTransport),
		},
		TLS: &dynamic.TLSConfiguration{
			Stores:  make(map[string]tls.Store),
			Options: make(map[string]tls.Options),
		},
		UDP: &dynamic.UDPConfiguration{
			Routers:  make(map[string]*dynamic.UDPRouter),
			Services: make(map[string]*dynamic.UDPService),
		},
	}

	err := file.DecodeContent(string(data), ".yaml", configuration)
	if err != nil {
		return nil, err
	}

	return configuration, nil
}

type transports struct{}

func (transports) GetRoundTripper(string) (http.RoundTripper, error) { return &http.Transport{}, nil }
func (transports) GetTLSConfig(string) (*stdtls.Config, error)       { return nil, nil }
func (transports) Get(string) (*dynamic.ServersTransport, error) {
	return &dynamic.ServersTransport{}, nil
}

func check(in input) (errs []string) {
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }

	fromFile, err := decodeConfiguration(in.Config)
	if err != nil {
		bad("HTTP provider decoder: %v", err)
		return errs
	}
	var fromJSON dynamic.Configuration
	dec := json.NewDecoder(bytes.NewReader(in.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fromJSON); err != nil {
		bad("strict encoding/json decoder: %v", err)
		return errs
	}
	errs = append(errs, routeTCP(fromFile, in.SNIProbes)...)
	if fromJSON.HTTP == nil {
		return errs
	}
	if len(fromFile.HTTP.Routers) != len(fromJSON.HTTP.Routers) || len(fromFile.HTTP.Services) != len(fromJSON.HTTP.Services) ||
		len(fromFile.HTTP.Middlewares) != len(fromJSON.HTTP.Middlewares) {
		bad("decoders disagree: %d/%d routers, %d/%d services, %d/%d middlewares", len(fromFile.HTTP.Routers), len(fromJSON.HTTP.Routers),
			len(fromFile.HTTP.Services), len(fromJSON.HTTP.Services), len(fromFile.HTTP.Middlewares), len(fromJSON.HTTP.Middlewares))
	}
	// Middlewares: every one a router names exists in the routers' own provider (no
	// '@'), or is an operator's by reference (name@provider, routing.Route.Middlewares:
	// defined in another provider of the ingress, never in http), and a retry decodes
	// the same from both decoders and is one Traefik builds. The operator's are given
	// stand-in definitions below, under their qualified names, so that Traefik's own
	// middleware builder resolves every router's chain.
	operator := map[string]bool{}
	for name, r := range fromFile.HTTP.Routers {
		j := fromJSON.HTTP.Routers[name]
		if j == nil || strings.Join(j.Middlewares, ",") != strings.Join(r.Middlewares, ",") {
			bad("router %s: decoders disagree on middlewares", name)
		}
		for _, m := range r.Middlewares {
			if _, p, ok := strings.Cut(m, "@"); ok && p != "http" && p != "" {
				operator[m] = true
				continue
			}
			if _, ok := fromFile.HTTP.Middlewares[m]; !ok || strings.Contains(m, "@") {
				bad("router %s: middleware %q is not in http.middlewares", name, m)
			}
		}
	}
	var retryCfg *dynamic.Retry
	for name, m := range fromFile.HTTP.Middlewares {
		j := fromJSON.HTTP.Middlewares[name]
		if m.Retry == nil || j == nil || j.Retry == nil {
			bad("middleware %s: not a retry in both decoders", name)
			continue
		}
		if !reflect.DeepEqual(retryAsBuilt(*m.Retry), retryAsBuilt(*j.Retry)) || m.Retry.Attempts < 2 || m.Retry.InitialInterval <= 0 {
			bad("middleware %s: retry decoded as %+v (file) and %+v (json)", name, *m.Retry, *j.Retry)
		}
		if _, err := retry.New(context.Background(), http.NotFoundHandler(), *m.Retry, retries{}, name); err != nil {
			bad("middleware %s: retry.New: %v", name, err)
		}
		retryCfg = m.Retry
	}
	if in.RetryCheck {
		if retryCfg == nil {
			bad("retry check asked for, but the configuration has no retry middleware")
		} else {
			errs = append(errs, retryBehaviour(*retryCfg)...)
		}
	}
	for name, s := range fromFile.HTTP.Services {
		j := fromJSON.HTTP.Services[name]
		switch {
		case s.Failover != nil:
			// The render writes no failover healthCheck (render/traefik.go, chain: with
			// one, Traefik requires the fallback to report status, which the unchecked
			// last leaf cannot); neither decoder may invent one.
			if s.Failover.HealthCheck != nil || j.Failover.HealthCheck != nil {
				bad("service %s: failover healthCheck present after decoding (file %v, json %v)", name, s.Failover.HealthCheck != nil, j.Failover.HealthCheck != nil)
			}
		case s.LoadBalancer != nil:
			for which, lb := range map[string]*dynamic.ServersLoadBalancer{"file": s.LoadBalancer, "json": j.LoadBalancer} {
				if lb.PassHostHeader == nil || !*lb.PassHostHeader {
					bad("service %s (%s): passHostHeader not true", name, which)
				}
				if hc := lb.HealthCheck; hc != nil && (hc.Interval <= 0 || hc.Timeout <= 0 || hc.FollowRedirects == nil || !*hc.FollowRedirects) {
					bad("service %s (%s): health check decoded as %+v", name, which, hc)
				}
				if p := lb.PassiveHealthCheck; p != nil && (p.MaxFailedAttempts < 1 || p.FailureWindow <= 0) {
					bad("service %s (%s): passive check decoded as %+v", name, which, p)
				}
			}
		}
	}

	// Build every service the routers use, the way Traefik does, under the provider
	// namespace "http".
	qualified := dynamic.Configuration{HTTP: &dynamic.HTTPConfiguration{
		Routers:     map[string]*dynamic.Router{},
		Services:    map[string]*dynamic.Service{},
		Middlewares: map[string]*dynamic.Middleware{},
	}}
	for name, m := range fromFile.HTTP.Middlewares {
		qualified.HTTP.Middlewares[name+"@http"] = m
	}
	for name := range operator {
		qualified.HTTP.Middlewares[name] = &dynamic.Middleware{Headers: &dynamic.Headers{
			CustomRequestHeaders: map[string]string{"X-Operator-Middleware": name}}}
	}
	for name, r := range fromFile.HTTP.Routers {
		rc := *r
		rc.Service += "@http"
		qualified.HTTP.Routers[name+"@http"] = &rc
	}
	for name, s := range fromFile.HTTP.Services {
		qualified.HTTP.Services[name+"@http"] = s
	}
	rt := runtime.NewConfig(qualified)
	tm := transports{}
	mgr := service.NewManager(rt.Services, nil, nil, tm, httputil.NewProxyBuilder(tm, nil))
	for name, r := range qualified.HTTP.Routers {
		if _, err := mgr.BuildHTTP(context.Background(), r.Service); err != nil {
			bad("router %s: building service %s: %v", name, r.Service, err)
		}
	}
	// Every router's middleware chain, the way Traefik's router manager builds it: each
	// name qualified in the router's provider (http) unless it names its own.
	mb := middleware.NewBuilder(rt.Middlewares, mgr, nil)
	for name, r := range qualified.HTTP.Routers {
		if len(r.Middlewares) == 0 {
			continue
		}
		ctx := provider.AddInContext(context.Background(), name)
		if _, err := middlewareChain(mb, ctx, r.Middlewares, http.NotFoundHandler()); err != nil {
			bad("router %s: building its middlewares %v: %v", name, r.Middlewares, err)
		}
	}

	parser, err := httpmuxer.NewSyntaxParser()
	if err != nil {
		bad("%v", err)
		return errs
	}
	mux := newHTTPMuxer(parser)
	names := make([]string, 0, len(fromFile.HTTP.Routers))
	for name := range fromFile.HTTP.Routers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := fromFile.HTTP.Routers[name]
		if err := addHTTPRoute(mux, r.Rule, r.RuleSyntax, r.Priority, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Router", name)
		})); err != nil {
			bad("router %s: %v", name, err)
		}
	}
	rd := requestdecorator.New(nil)
	for _, p := range in.Probes {
		req, err := http.NewRequest(http.MethodGet, "http://"+p.Host+p.Target, nil)
		if err != nil {
			bad("probe %s%s: %v", p.Host, p.Target, err)
			continue
		}
		req.Host = p.Host
		req = sanitizeAndNormalize(req)
		rec := httptest.NewRecorder()
		rd.ServeHTTP(rec, req, mux.ServeHTTP)
		if got := rec.Header().Get("X-Router"); got != p.Want {
			bad("%s%s → %q, want %q", p.Host, p.Target, got, p.Want)
		}
	}
	return errs
}

// tcpRouter is the handler the TCP muxer returns for the router of that name.
type tcpRouter string

func (tcpRouter) ServeTCP(tcp.WriteCloser) {}

// routeTCP adds every TCP router of conf to Traefik's TCP muxer, as the TLS entry point
// does, and matches each probe's server name after the entry point's own folding
// (tcpmuxer.NewConnData).
func routeTCP(conf *dynamic.Configuration, probes []sniProbe) (errs []string) {
	if conf.TCP == nil || len(conf.TCP.Routers) == 0 {
		if len(probes) > 0 {
			errs = append(errs, "server name probes, but no TCP router")
		}
		return errs
	}
	mux, err := newTCPMuxer()
	if err != nil {
		return []string{err.Error()}
	}
	names := make([]string, 0, len(conf.TCP.Routers))
	for name := range conf.TCP.Routers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := conf.TCP.Routers[name]
		if err := addTCPRoute(mux, r.Rule, r.RuleSyntax, r.Priority, tcpRouter(name)); err != nil {
			errs = append(errs, fmt.Sprintf("TCP router %s: %v", name, err))
		}
	}
	for _, p := range probes {
		cd, err := connData(p.ServerName)
		if err != nil {
			errs = append(errs, fmt.Sprintf("server name %q: %v", p.ServerName, err))
			continue
		}
		got := ""
		if h, _ := mux.Match(cd); h != nil {
			got = string(h.(tcpRouter))
		}
		if got != p.Want {
			errs = append(errs, fmt.Sprintf("server name %+q → TCP router %q, want %q", p.ServerName, got, p.Want))
		}
	}
	return errs
}

// retries counts the retry middleware's retries in n and calls on, if set, with each:
// Traefik's retry notifies its listener before the backoff wait of the next attempt.
type retries struct {
	n  *atomic.Int32
	on func()
}

func (r retries) Retried(*http.Request, int) {
	if r.n != nil {
		r.n.Add(1)
	}
	if r.on != nil {
		r.on()
	}
}

// retryBehaviour sends POSTs through Traefik's retry middleware with cfg in front of a
// service Traefik's manager built for one server (a lone leaf, as the render writes
// it), the way a router chains them:
//
//   - the server's port refuses connections for at least one second (an in-place
//     restart) and opens at the first retry after it: the POST gets the answer, with
//     its body, and the server sees it once;
//   - the server reads the request's headers and drops the connection without an
//     answer: the POST gets 502 and the server saw it exactly once. Traefik's
//     retry.WrapHandler turns retrying off at httptrace WroteHeaders, so a request
//     whose headers were written is never sent again.
func retryBehaviour(cfg dynamic.Retry) (errs []string) {
	bad := func(format string, args ...any) {
		errs = append(errs, "retry behaviour: "+fmt.Sprintf(format, args...))
	}
	handlerFor := func(addr string, onRetry func()) (http.Handler, *atomic.Int32, error) {
		pass := true
		conf := dynamic.Configuration{HTTP: &dynamic.HTTPConfiguration{Services: map[string]*dynamic.Service{
			"leaf@http": {LoadBalancer: &dynamic.ServersLoadBalancer{
				Servers:        []dynamic.Server{{URL: "http://" + addr}},
				PassHostHeader: &pass,
			}},
		}}}
		rt := runtime.NewConfig(conf)
		tm := transports{}
		svc, err := service.NewManager(rt.Services, nil, nil, tm, httputil.NewProxyBuilder(tm, nil)).BuildHTTP(context.Background(), "leaf@http")
		if err != nil {
			return nil, nil, err
		}
		n := &atomic.Int32{}
		h, err := retry.New(context.Background(), svc, cfg, retries{n: n, on: onRetry}, "scafo-retry@http")
		return h, n, err
	}
	post := func(h http.Handler) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "http://app.example.com/orders", strings.NewReader("order=1"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	// An in-place restart: nothing listens until the POST has been refused for one
	// second; the port opens at the first retry after that (refused: the middleware's
	// notification, sent before its backoff wait), so the next attempt finds it serving.
	// Retries that run out within the second leave it closed and the POST failed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		bad("%v", err)
		return errs
	}
	addr := l.Addr().String()
	l.Close()
	refused := make(chan struct{}, 64)
	h, retried, err := handlerFor(addr, func() {
		select {
		case refused <- struct{}{}:
		default: // the opener has one pending already
		}
	})
	if err != nil {
		bad("building: %v", err)
		return errs
	}
	var seen atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})}
	defer srv.Close()
	start := time.Now()
	answered := make(chan struct{})
	go func() {
		for {
			select {
			case <-answered:
				return // the check below reports the failed request
			case <-refused:
			}
			if time.Since(start) < time.Second {
				continue
			}
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return // the check below reports the failed request
			}
			srv.Serve(l)
			return
		}
	}()
	rec := post(h)
	close(answered)
	took := time.Since(start).Round(time.Millisecond)
	if rec.Code != http.StatusOK || rec.Body.String() != "order=1" || seen.Load() != 1 {
		bad("restart: %d %q after %s and %d retries, the server saw %d requests; want 200 \"order=1\", seen once",
			rec.Code, rec.Body.String(), took, retried.Load(), seen.Load())
	} else {
		fmt.Printf("retry behaviour: a POST refused for 1s by a restart answered 200 after %s and %d retries (attempts %d, initialInterval %s)\n",
			took, retried.Load(), cfg.Attempts, time.Duration(cfg.InitialInterval))
	}

	// Headers written, then the connection dropped: never sent twice.
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		bad("%v", err)
		return errs
	}
	defer dl.Close()
	var got atomic.Int32
	var conns sync.WaitGroup
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := dl.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a connection never written to
				var buf []byte
				tmp := make([]byte, 4096)
				for !strings.Contains(string(buf), "\r\n\r\n") {
					n, err := c.Read(tmp)
					if err != nil {
						return
					}
					buf = append(buf, tmp[:n]...)
				}
				got.Add(1)
			}()
		}
	}()
	h, retried, err = handlerFor(dl.Addr().String(), nil)
	if err != nil {
		bad("building: %v", err)
		return errs
	}
	rec = post(h)
	// The middleware answers after its last attempt, and an attempt whose headers reached
	// the server ends only when the server drops it, after counting it. With the listener
	// closed and every accepted connection's reader done, got counts every send.
	dl.Close()
	<-accepting
	conns.Wait()
	if rec.Code != http.StatusBadGateway || got.Load() != 1 || retried.Load() != 0 {
		bad("dropped after headers: %d, the server saw %d requests and %d retries; want 502, once, no retry", rec.Code, got.Load(), retried.Load())
	}
	return errs
}

// sanitizeAndNormalize is the entry point's normalizePath then sanitizePath
// (pkg/server/server_entrypoint_tcp.go, unexported there, condensed here).
func sanitizeAndNormalize(req *http.Request) *http.Request {
	if raw := req.URL.RawPath; raw != "" {
		var b strings.Builder
		for i := 0; i < len(raw); i++ {
			if raw[i] != '%' || i+2 >= len(raw) {
				b.WriteByte(raw[i])
				continue
			}
			e := strings.ToUpper(raw[i : i+3])
			var c byte
			if _, err := fmt.Sscanf(e[1:], "%02X", &c); err == nil && isUnreserved(c) {
				b.WriteByte(c)
			} else {
				b.WriteString(e)
			}
			i += 2
		}
		req.URL.RawPath = b.String()
	}
	req.URL = req.URL.JoinPath()
	req.RequestURI = req.URL.RequestURI()
	return req
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}
