package testnode

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/s3/s3test"
)

// FakePlugin polls a node the way the provider plugin does: it reports the serial and
// revision of the last configuration it took (X-Scafo-Serial, X-Scafo-Revision of a
// 200) on its next poll. Frozen stops it taking new configurations (a Traefik that
// cannot apply); Stop ends its polls.
type FakePlugin struct {
	Name    string
	Frozen  atomic.Bool
	n       *Node
	mu      sync.Mutex
	serial  uint64
	rev     string
	epoch   string
	held    []byte // the configuration it took last
	stopped chan struct{}
	done    chan struct{}
}

// StartFakePlugin starts a fake plugin named name polling n every 20 ms, until Stop or
// the test's end.
func StartFakePlugin(t testing.TB, n *Node, name string) *FakePlugin {
	p := &FakePlugin{Name: name, n: n, stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stopped:
				return
			case <-time.After(20 * time.Millisecond):
			}
			p.poll()
		}
	}()
	t.Cleanup(p.Stop)
	return p
}

// Stop ends the plugin's polls and waits for the last one to end.
func (p *FakePlugin) Stop() {
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
	}
	<-p.done
}

func (p *FakePlugin) poll() {
	req, _ := http.NewRequest(http.MethodGet, p.n.URL+"/v1/ingress/traefik", nil)
	req.Header.Set("Authorization", "Bearer "+IngressToken)
	req.Header.Set(api.HeaderIngress, p.Name)
	req.Header.Set(api.HeaderIngressKind, api.KindPlugin)
	p.mu.Lock()
	if p.serial > 0 {
		req.Header.Set(api.HeaderAppliedSerial, strconv.FormatUint(p.serial, 10))
		req.Header.Set(api.HeaderAppliedRevision, p.rev)
		if p.epoch != "" {
			req.Header.Set(api.HeaderAppliedEpoch, p.epoch)
		}
	}
	p.mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || p.Frozen.Load() {
		return
	}
	n, _ := strconv.ParseUint(resp.Header.Get("X-Scafo-Serial"), 10, 64)
	p.mu.Lock()
	p.serial, p.rev, p.epoch = n, resp.Header.Get("X-Scafo-Revision"), resp.Header.Get("X-Scafo-Epoch")
	p.held = body
	p.mu.Unlock()
}

// Holds is the configuration the plugin took last.
func (p *FakePlugin) Holds() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// ReportsConfig is Config with ingresses.lostAfter 2s and forgetAfter 1h.
func ReportsConfig(t testing.TB, name, storeDir string) *node.Config {
	cfg := Config(t, name, storeDir)
	cfg.Ingresses.LostAfter = ptypes.Duration(2 * time.Second)
	cfg.Ingresses.ForgetAfter = ptypes.Duration(time.Hour)
	return cfg
}

// ReportBackend is a fleet store the ingress-report tests run on.
type ReportBackend struct {
	Name string
	// Open returns a new client of the one fleet store, as a node on its own machine
	// holds (a new S3 client on the same bucket, or the same directory).
	Open func(t *testing.T) store.Store
}

// OnReportBackends runs test on a directory store and on a bucket of a real MinIO
// (package s3test: skipped without one outside CI, failed in CI), the two at once: each
// has its own store, nodes and counters, and most of either's time is waiting on
// intervals (lostAfter, refreshes, view ages).
func OnReportBackends(t *testing.T, test func(t *testing.T, be ReportBackend)) {
	t.Run("dir", func(t *testing.T) {
		t.Parallel()
		p := t.TempDir()
		test(t, ReportBackend{Name: "dir", Open: func(t *testing.T) store.Store { return OpenDir(t, p) }})
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		bcfg := s3test.Shared(t).NewBucket(t)
		test(t, ReportBackend{Name: "s3", Open: func(t *testing.T) store.Store { return OpenS3(t, bcfg) }})
	})
}

// StartReportsNode starts a node named name with ReportsConfig on its own client of be.
func StartReportsNode(t *testing.T, be ReportBackend, name string) *Node {
	t.Helper()
	n := StartWithStore(t, ReportsConfig(t, name, t.TempDir()), be.Open(t))
	n.WaitReady()
	return n
}

// ListenOn opens a loopback listener that accepts and closes connections (an
// application process, as far as the probe's TCP dial is concerned) and returns its port.
func ListenOn(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
