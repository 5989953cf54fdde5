package node_test

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
)

// updateWire rewrites testdata/wire/*.golden from what the node answers now:
//
//	go test ./node/ -run TestWireGoldens -update-wire
var updateWire = flag.Bool("update-wire", false, "rewrite node/testdata/wire/*.golden")

// The HTTP wire is pinned by golden files: the status body, the ?wait=applied envelope
// (200 and 202), the error envelope and the X-Scafo-* headers of the routing endpoints'
// 200 and 304. What varies from run to run (times, ages, ports, hashes, serials) is
// replaced by a placeholder; everything else (status codes, header names and values,
// JSON field names and order, omitempty) must be byte-identical.
func TestWireGoldens(t *testing.T) {
	t.Parallel()
	n := startReportsNode(t, reportBackend{Name: "dir", Open: func(t *testing.T) store.Store { return openDir(t, t.TempDir()) }}, "vps-a")
	p := startFakePlugin(t, n, "edge-1")
	port := listenOn(t)
	n.Must(201, "PUT", "/v1/apps/shop", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(200, "PUT", "/v1/node/instances/shop", testAdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, port))
	waitFor(t, 10*time.Second, "the ingress holds the instance", func() bool {
		return bytes.Contains(p.Holds(), []byte(fmt.Sprintf("127.0.0.1:%d", port)))
	})
	waitFor(t, 10*time.Second, "the ingress reports what it holds", func() bool {
		in, ok := ingressesOf(t, n)["edge-1"]
		return ok && in.Applied != nil && in.Applied.Serial == serialOf(t, n.St)
	})

	var cases []wireCase
	add := func(name string, resp *http.Response, body []byte) {
		cases = append(cases, wireCase{name, resp, body})
	}

	// The error envelope.
	resp, body := n.Get("/v1/nope", testIngressToken)
	add("error-404", resp, body)
	resp, body = n.Do(http.MethodPatch, "/v1/status", testIngressToken, "")
	add("error-405", resp, body)
	resp, body = n.Get("/v1/status", "wrong-token")
	add("error-401", resp, body)
	resp, body = n.Get("/v1/ingress/traefik?wait=soon", testIngressToken)
	add("error-400-wait", resp, body)
	resp, body = n.Do(http.MethodPut, "/v1/apps/cart?wait=later", testAdminToken, `{"account":"acme"}`)
	add("error-400-wait-applied", resp, body)
	resp, body = n.Get("/v1/ingress/traefik?group=nowhere", testIngressToken)
	add("error-404-group", resp, body)

	// The routing endpoints' headers on 200 and 304 (bodies are pinned by render's goldens).
	for _, path := range []string{"/v1/ingress/traefik", "/v1/ingress/routes", "/v1/ingress/traefik?group=default"} {
		name := strings.NewReplacer("/v1/ingress/", "", "?group=", "-group-").Replace(path)
		resp, body = n.Get(path, testIngressToken)
		add("headers-200-"+name, resp, nil)
		resp, _ = n.Get(path, testIngressToken, "Accept-Encoding", "gzip")
		add("headers-200-gzip-"+name, resp, nil)
		resp, _ = n.Get(path, testIngressToken, "If-None-Match", resp.Header.Get("ETag"))
		add("headers-304-"+name, resp, nil)
		_ = body
	}

	// The ?wait=applied envelope: applied (200), and at the timeout (202) with the
	// ingress behind.
	resp, body = n.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=20s", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	add("wait-applied-200", resp, body)
	p.Frozen.Store(true)
	resp, body = n.Do(http.MethodPut, "/v1/apps/shop/domains/ti.to?wait=applied&timeout=2s", testAdminToken, "")
	add("wait-applied-202", resp, body)
	p.Frozen.Store(false)
	resp, body = n.Do(http.MethodPut, "/v1/node/instances/shop?wait=applied&timeout=20s", testAdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, port))
	add("wait-applied-instance-200", resp, body)

	// The status body, last: it names the ingress and what it holds.
	waitFor(t, 10*time.Second, "the ingress reports the latest serial", func() bool {
		in, ok := ingressesOf(t, n)["edge-1"]
		return ok && in.Applied != nil && in.Applied.Serial == serialOf(t, n.St)
	})
	resp, body = n.Get("/v1/status", testIngressToken)
	add("status", resp, body)

	norm := wireNormalizer(n, port)
	dir := filepath.Join("testdata", "wire")
	for _, c := range cases {
		got := norm(c.dump())
		file := filepath.Join(dir, c.name+".golden")
		if *updateWire {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: %v (run with -update-wire to record it)", c.name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the wire changed\n--- got\n%s\n--- want (%s)\n%s", c.name, got, file, want)
		}
	}
}

type wireCase struct {
	name string
	resp *http.Response
	body []byte
}

// dump is the answer as the golden file holds it: the status line, the headers sorted
// (Date left out), a blank line and the body.
func (c wireCase) dump() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n", c.resp.StatusCode)
	keys := make([]string, 0, len(c.resp.Header))
	for k := range c.resp.Header {
		if k != "Date" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range c.resp.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	b.Write(c.body)
	return b.Bytes()
}

// wireNormalizer replaces what varies between runs by placeholders.
func wireNormalizer(n *testNode, instancePort int) func([]byte) []byte {
	apiPort := n.URL[strings.LastIndex(n.URL, ":")+1:]
	type rule struct {
		re   *regexp.Regexp
		with string
	}
	rules := []rule{
		{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
		{regexp.MustCompile(`"ageSeconds":\d+(\.\d+)?`), `"ageSeconds":<n>`},
		{regexp.MustCompile(`"(serial|heldSerial|appliedSerial)":\d+`), `"$1":<serial>`},
		{regexp.MustCompile(`serial \d+`), `serial <serial>`},
		{regexp.MustCompile(`(X-Scafo-Serial): \d+`), `$1: <serial>`},
		{regexp.MustCompile(`(Content-Length): \d+`), `$1: <len>`},
		{regexp.MustCompile(`\b` + apiPort + `\b`), "<apiPort>"},
		{regexp.MustCompile(fmt.Sprintf(`\b%d\b`, instancePort)), "<port>"},
		{regexp.MustCompile(`[0-9a-f]{8,}`), "<hex>"},
	}
	return func(b []byte) []byte {
		for _, r := range rules {
			b = r.re.ReplaceAll(b, []byte(r.with))
		}
		return b
	}
}
