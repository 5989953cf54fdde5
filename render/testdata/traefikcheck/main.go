// Command traefikcheck runs Traefik v3.6.12's own code over rendered configurations:
// the HTTP provider's decoder, encoding/json into Traefik's types with unknown fields
// refused (the plugin provider's decoder, made strict), the service manager building
// every service a router uses (failover health-check wiring included), and the HTTP
// muxer parsing every rule and routing probe requests after the entry point's path
// normalisation. It is built in a throwaway module by TestTraefikDecodesTheRender
// (render/traefik_check_test.go, SCAFO_TRAEFIK_DECODE=1); it is not part of the
// scafo module.
package main

import (
	"bytes"
	"context"
	stdtls "crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"

	"github.com/traefik/paerser/file"
	"github.com/traefik/traefik/v3/pkg/config/dynamic"
	"github.com/traefik/traefik/v3/pkg/config/runtime"
	"github.com/traefik/traefik/v3/pkg/middlewares/requestdecorator"
	httpmuxer "github.com/traefik/traefik/v3/pkg/muxer/http"
	"github.com/traefik/traefik/v3/pkg/proxy/httputil"
	"github.com/traefik/traefik/v3/pkg/server/service"
	"github.com/traefik/traefik/v3/pkg/tls"
)

type input struct {
	Name   string          `json:"name"`
	Config json.RawMessage `json:"config"`
	Probes []probe         `json:"probes"`
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
	fmt.Printf("ok: %d configurations\n", len(inputs))
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
	if fromJSON.HTTP == nil {
		return errs
	}
	if len(fromFile.HTTP.Routers) != len(fromJSON.HTTP.Routers) || len(fromFile.HTTP.Services) != len(fromJSON.HTTP.Services) {
		bad("decoders disagree: %d/%d routers, %d/%d services", len(fromFile.HTTP.Routers), len(fromJSON.HTTP.Routers),
			len(fromFile.HTTP.Services), len(fromJSON.HTTP.Services))
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
		Routers:  map[string]*dynamic.Router{},
		Services: map[string]*dynamic.Service{},
	}}
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

	parser, err := httpmuxer.NewSyntaxParser()
	if err != nil {
		bad("%v", err)
		return errs
	}
	mux := httpmuxer.NewMuxer(parser)
	names := make([]string, 0, len(fromFile.HTTP.Routers))
	for name := range fromFile.HTTP.Routers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := fromFile.HTTP.Routers[name]
		if err := mux.AddRoute(r.Rule, r.RuleSyntax, r.Priority, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
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
