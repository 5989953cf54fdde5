package testnode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/node/store/s3"
)

// GrepLines is the lines of s that contain sub.
func GrepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Served is one answer of a routing endpoint.
type Served struct {
	Code int
	ETag string
	Body []byte
}

// Serve is n's answer to path with the ingress token.
func Serve(n *Node, path string) Served {
	resp, b := n.Get(path, IngressToken)
	return Served{resp.StatusCode, resp.Header.Get("ETag"), b}
}

// Identical reports whether every node answers path with 200 and the same bytes and
// ETag, and returns that answer.
func Identical(nodes []*Node, path string) (Served, bool) {
	first := Serve(nodes[0], path)
	if first.Code != http.StatusOK {
		return first, false
	}
	for _, n := range nodes[1:] {
		s := Serve(n, path)
		if s.Code != http.StatusOK || s.ETag != first.ETag || !bytes.Equal(s.Body, first.Body) {
			return first, false
		}
	}
	return first, true
}

// StatusOf is n's /v1/status, decoded; anything but 200 fails the test.
func StatusOf(t testing.TB, n *Node) api.Status {
	t.Helper()
	resp, b := n.Get("/v1/status", AdminToken)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s status: %d %s", n.Cfg.Node.Name, resp.StatusCode, b)
	}
	var s api.Status
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s status: %v: %s", n.Cfg.Node.Name, err, b)
	}
	return s
}

// OpenDir opens a directory store at path.
func OpenDir(t testing.TB, path string) *dir.Store {
	t.Helper()
	st, err := dir.New(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// OpenS3 opens an S3 store.
func OpenS3(t testing.TB, cfg s3.Config) *s3.Store {
	t.Helper()
	st, err := s3.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// FleetConfig is a node config for fleet tests: name, its fleet address, timings.
func FleetConfig(t testing.TB, name, address string, interval, heartbeat, ttl time.Duration) *node.Config {
	t.Helper()
	cfg := Config(t, name, t.TempDir())
	cfg.Node.Address = address
	cfg.Reconcile.Interval = ptypes.Duration(interval)
	cfg.Reconcile.Heartbeat = ptypes.Duration(heartbeat)
	cfg.Reconcile.NodeTTL = ptypes.Duration(ttl)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// UpstreamNodes maps each route's host (and "api" for the API apex) to its upstream
// node names, in order.
func UpstreamNodes(doc map[string]any) map[string][]string {
	out := map[string][]string{}
	names := func(v any) []string {
		var ns []string
		us, _ := v.([]any)
		for _, u := range us {
			ns = append(ns, u.(map[string]any)["node"].(string))
		}
		return ns
	}
	rs, _ := doc["routes"].([]any)
	for _, r := range rs {
		m := r.(map[string]any)
		out[m["host"].(string)] = names(m["upstreams"])
	}
	if api, ok := doc["api"].(map[string]any); ok {
		out["api"] = names(api["upstreams"])
	}
	return out
}

// SerialOf is the store's change serial.
func SerialOf(t testing.TB, st store.Store) uint64 {
	t.Helper()
	n, _, err := store.ReadSerial(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// IngressesOf is the ingresses n's status reports, by name.
func IngressesOf(t testing.TB, n *Node) map[string]api.Ingress {
	t.Helper()
	out := map[string]api.Ingress{}
	for _, in := range StatusOf(t, n).Ingresses {
		out[in.Name] = in
	}
	return out
}

// Raw sends target exactly as written on the request line (no client-side cleaning or
// re-escaping) and returns the status and body.
func Raw(t testing.TB, n *Node, method, target, token, body string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(n.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n", method, target)
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// FleetOf creates apps (account acme unless given "app@account") placed on this node
// with ready instances, claims ti.to for the first, and waits until all are routed.
func FleetOf(t testing.TB, n *Node, apps ...string) {
	t.Helper()
	for i, spec := range apps {
		app, account, ok := strings.Cut(spec, "@")
		if !ok {
			account = "acme"
		}
		n.Must(201, "PUT", "/v1/apps/"+app, AdminToken, fmt.Sprintf(`{"account":%q,"placement":["vps-a"]}`, account))
		n.Must(200, "PUT", "/v1/node/instances/"+app, AdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, 25000+i))
	}
	n.Must(201, "PUT", "/v1/apps/"+strings.Split(apps[0], "@")[0]+"/domains/ti.to", AdminToken, "")
	nodetest.WaitFor(t, 5*time.Second, "apps routed", func() bool {
		ok := len(HostsOf(RoutesDoc(t, n))) == len(apps)+1
		if !ok && testing.Verbose() {
			_, b := n.Get("/v1/status", AdminToken)
			t.Logf("hosts %v status %s", HostsOf(RoutesDoc(t, n)), b)
		}
		return ok
	})
}

// StoreBytes snapshots every file of a dir store (the audit and serial included).
func StoreBytes(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

// PathsOf is the path map of host's route in n's document.
func PathsOf(t testing.TB, n *Node, host string) map[string]any {
	t.Helper()
	for _, r := range RoutesDoc(t, n)["routes"].([]any) {
		m := r.(map[string]any)
		if m["host"] == host {
			p, _ := m["paths"].(map[string]any)
			return p
		}
	}
	return nil
}
