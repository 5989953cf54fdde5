package node

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// TestConcurrentPollsOfANewRevisionRenderOnce: N pollers waking on one revision change
// cost one render per (revision, prefer, format), not N.
func TestConcurrentPollsOfANewRevisionRenderOnce(t *testing.T) {
	p := newPublisher(render.Options{}, t.TempDir())
	doc, _ := fleet.Derive(fleet.GenerateState(2000, 1000), fleet.GenerateOptions())
	p.publish(doc, time.Now())
	s := p.cur.Load()
	var wg sync.WaitGroup
	bodies := make([][]byte, 64)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.get(s, "", api.FormatTraefik)
			if err != nil {
				t.Error(err)
				return
			}
			bodies[i] = r.body
		}()
	}
	wg.Wait()
	if n := p.renders.Load(); n != 1 {
		t.Fatalf("%d renders for 64 concurrent polls of one key, want 1", n)
	}
	for i := range bodies {
		if string(bodies[i]) != string(bodies[0]) || len(bodies[i]) == 0 {
			t.Fatal("pollers got different bodies")
		}
	}
}

// TestLargeBodiesServedFromSpillFilesMatchMemory: bodies above sendfileMin go out with
// sendfile from their spill file; what arrives must be exactly the rendered bytes, for
// both representations, and the spill files must go when the node stops.
func TestLargeBodiesServedFromSpillFilesMatchMemory(t *testing.T) {
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	apps := make([]string, 400)
	for i := range apps {
		apps[i] = fmt.Sprintf("app%03d", i)
	}
	seedFleet(t, n.st, apps...)
	n.waitReady()
	waitFor(t, 10*time.Second, "400 apps routed", func() bool { return len(hostsOf(routesDoc(t, n))) == 400 })

	resp, body := n.get("/v1/ingress/traefik", testIngressToken)
	snap := n.srv.pub.current()
	rend, err := n.srv.pub.get(snap, "", api.FormatTraefik)
	if err != nil {
		t.Fatal(err)
	}
	if len(rend.body) < sendfileMin || rend.file == "" || rend.gzFile == "" {
		t.Fatalf("body %d bytes, spill files %q %q: the sendfile path is not exercised", len(rend.body), rend.file, rend.gzFile)
	}
	if resp.StatusCode != 200 || !bytes.Equal(body, rend.body) || resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("identity: %d, %d bytes, equal %v", resp.StatusCode, len(body), bytes.Equal(body, rend.body))
	}
	_, gzBody := n.get("/v1/ingress/traefik", testIngressToken, "Accept-Encoding", "gzip")
	if !bytes.Equal(gzBody, rend.gz) {
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
	spill := n.srv.pub.spillDir
	n.stop()
	if _, err := os.Stat(spill); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("spill dir %s left behind after stop (%v)", spill, err)
	}
}

// TestSpillFilesLiveUnderTheStateDirAndStartEmpty: rendered bodies spill to
// <stateDir>/bodies, which a start empties (a crashed run's files) and a stop removes.
func TestSpillFilesLiveUnderTheStateDirAndStartEmpty(t *testing.T) {
	cfg := testConfig(t, "vps-a", t.TempDir())
	bodies := filepath.Join(cfg.StateDir, "bodies")
	if err := os.MkdirAll(bodies, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(bodies, "body-left-by-a-crash")
	if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cfg)
	n.waitReady()
	if n.srv.pub.spillDir != bodies {
		t.Fatalf("spill dir %q, want %q", n.srv.pub.spillDir, bodies)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a crashed run's spill file survived the start (%v)", err)
	}
	n.stop()
	if _, err := os.Stat(bodies); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s left behind after stop (%v)", bodies, err)
	}
}
