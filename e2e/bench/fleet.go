package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// Tokens of every benchmark node (hex, like minted ones).
const (
	benchIngressToken = "b0e1c2h3ingress000000000000000000000000000000000000000000000001"
	benchAdminToken   = "b0e1c2h3admin00000000000000000000000000000000000000000000000002"
	// platformDomain is the one fleet.GenerateOptions derives with; nodes must run with
	// it or the generated applications would get other hosts.
	platformDomain = "apps.example.com"
)

// appsForRoutes is how many generated applications derive to about routes routes
// (fleet.GenerateState gives ~1.12 routes per application).
func appsForRoutes(routes int) int { return routes * 100 / 112 }

// writeFleet writes fleet.GenerateState(nApps, nPrefixes) into a dir store at root
// through the store API, one object per key as the node's API would, and bumps the
// serial once. It returns the derived route count.
func writeFleet(t *task, root string, nApps, nPrefixes int) int {
	st, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	state := fleet.GenerateState(nApps, nPrefixes)
	ctx := context.Background()
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, key, b, store.Condition{}); err != nil {
			t.Fatalf("writing %s: %v", key, err)
		}
	}
	start := time.Now()
	for _, a := range state.Apps {
		put(fleet.PrefixApps+a.Name+".json", a)
	}
	for _, c := range state.Claims {
		put(fleet.PrefixDomains+c.Host+".json", c)
	}
	for _, n := range state.Nodes {
		put(fleet.PrefixNodes+n.Name+".json", n)
	}
	if _, err := store.BumpSerial(ctx, st); err != nil {
		t.Fatal(err)
	}
	doc, _ := fleet.Derive(state, fleet.GenerateOptions())
	t.Logf("wrote %d apps, %d claims, %d prefixes into %s in %s (%d routes)",
		len(state.Apps), len(state.Claims), nPrefixes, root, time.Since(start).Round(time.Millisecond), len(doc.Routes))
	return len(doc.Routes)
}

// benchNode is one scafo-node process on 127.0.0.1.
type benchNode struct {
	name string
	port int
	proc *proc.Proc
}

// newNode prepares (does not start) a node named name on storeRoot.
func newNode(t *task, name, storeRoot string, extra ...string) *benchNode {
	n := &benchNode{name: name, port: freePort(t)}
	// Two live nodes never share a node.address (a second one is refused at start):
	// bench-b, the second node of a two-node fleet, is 127.0.0.2.
	address := "127.0.0.1"
	if name == "bench-b" {
		address = "127.0.0.2"
	}
	args := []string{
		"--listen=" + addr(n.port),
		"--stateDir=" + t.TempDir(),
		"--node.name=" + name,
		"--node.address=" + address,
		"--ingress.token=" + benchIngressToken,
		"--admin.token=" + benchAdminToken,
		"--store.dir.path=" + storeRoot,
		"--platform.domains=" + platformDomain,
		"--log.level=warn",
		"--reconcile.nodeTTL=" + benchNodeTTL.String(), // the generated records stay live (fleetObjects)
	}
	n.proc = newProc(t, name, bins.node, append(args, extra...)...)
	return n
}

func (n *benchNode) url(path string) string { return "http://" + addr(n.port) + path }

// start runs the node and waits for /v1/readyz (its first complete reconcile pass).
func (n *benchNode) start(t *task) time.Duration {
	n.proc.MustStart(t)
	const limit = 120 * time.Second
	if err := n.proc.WaitUntil(limit, func() error { return proc.HTTPOK(nil, n.url("/v1/readyz")) }); err != nil {
		t.Fatalf("waiting %s for %s ready: %v", limit, n.name, err)
	}
	return time.Since(n.proc.Started())
}

// poll is one GET of the Traefik configuration.
type poll struct {
	status int
	etag   string
	body   []byte
}

// pollClient does not decompress: the gzip representation is compared as bytes.
var pollClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}}

func (n *benchNode) poll(gzip bool) (poll, error) {
	req, err := http.NewRequest(http.MethodGet, n.url("/v1/ingress/traefik"), nil)
	if err != nil {
		return poll{}, err
	}
	req.Header.Set("Authorization", "Bearer "+benchIngressToken)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := pollClient.Do(req)
	if err != nil {
		return poll{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return poll{}, fmt.Errorf("reading the body from %s: %w", n.name, err)
	}
	if gzip != (resp.Header.Get("Content-Encoding") == "gzip") {
		return poll{}, fmt.Errorf("%s: Accept-Encoding gzip=%v but Content-Encoding %q", n.name, gzip, resp.Header.Get("Content-Encoding"))
	}
	return poll{status: resp.StatusCode, etag: resp.Header.Get("ETag"), body: b}, nil
}

func mustPoll(t *task, n *benchNode, gzip bool) poll {
	p, err := n.poll(gzip)
	if err != nil {
		t.Fatal(err)
	}
	if p.status != http.StatusOK {
		t.Fatalf("%s: GET /v1/ingress/traefik: %d %.200s", n.name, p.status, p.body)
	}
	return p
}

// storeDir makes a store directory under a fresh temp dir.
func storeDir(t *task) string {
	p := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }
