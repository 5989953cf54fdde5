package node_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/publish"
)

// sendfileMin is the body size from which node/httpapi serves a spill file.
const sendfileMin = httpapi.SendfileMin

// TestLargeBodiesServedFromSpillFilesMatchMemory: bodies above sendfileMin go out with
// sendfile from their spill file; what arrives must be exactly the rendered bytes, for
// both representations. The spill files live in <stateDir>/bodies, which a start
// empties (a crashed run's files) and a stop removes.
func TestLargeBodiesServedFromSpillFilesMatchMemory(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	bodies := filepath.Join(cfg.StateDir, "bodies")
	stale := filepath.Join(bodies, "body-left-by-a-crash")
	if err := os.MkdirAll(bodies, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	apps := make([]string, 400)
	for i := range apps {
		apps[i] = fmt.Sprintf("app%03d", i)
	}
	seedFleet(t, openDir(t, cfg.Store.Dir.Path), apps...) // before the start: one pass reads them all
	n := startNode(t, cfg)
	n.WaitReady()
	waitFor(t, 10*time.Second, "400 apps routed", func() bool { return len(hostsOf(routesDoc(t, n))) == 400 })

	// The GET and the snapshot read after it are of one revision once the document has
	// settled (this node's own record can still move it): compare those.
	var resp *http.Response
	var body []byte
	var rend *publish.Rendered
	waitFor(t, 10*time.Second, "a GET and the current snapshot of one revision", func() bool {
		resp, body = n.Get("/v1/ingress/traefik", testIngressToken)
		var err error
		if rend, err = n.Srv.Pub().Body(n.Srv.Pub().Current(), publish.Request{Format: api.FormatTraefik}); err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get("ETag") == rend.ETag()
	})
	if len(rend.Body()) < sendfileMin || rend.File() == "" || rend.GzFile() == "" {
		t.Fatalf("body %d bytes, spill files %q %q: the sendfile path is not exercised", len(rend.Body()), rend.File(), rend.GzFile())
	}
	if resp.StatusCode != 200 || !bytes.Equal(body, rend.Body()) || resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("identity: %d, %d bytes, equal %v", resp.StatusCode, len(body), bytes.Equal(body, rend.Body()))
	}
	_, gzBody := n.Get("/v1/ingress/traefik", testIngressToken, "Accept-Encoding", "gzip")
	if !bytes.Equal(gzBody, rend.Gzip()) {
		t.Fatal("gzip body differs from the rendered gzip bytes")
	}
	zr, err := gzip.NewReader(bytes.NewReader(gzBody))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, body) {
		t.Fatal("gzip body does not decompress to the identity body")
	}
	if spill := n.Srv.Pub().SpillDir(); spill != bodies || filepath.Dir(rend.File()) != bodies {
		t.Fatalf("spill dir %q (file %q), want %q", spill, rend.File(), bodies)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a crashed run's spill file survived the start (%v)", err)
	}
	n.Stop()
	if _, err := os.Stat(bodies); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("spill dir %s left behind after stop (%v)", bodies, err)
	}
}
