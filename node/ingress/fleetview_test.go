package ingress

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/node/store/s3"
	"github.com/scafo/ingress/node/store/s3/s3test"
)

// TestMain stops the MinIO that s3test starts for this package's tests.
func TestMain(m *testing.M) { s3test.Main(m) }

// getFails fails the GET of one key once, and counts the GETs of ingresses/ that
// returned an object.
type getFails struct {
	store.Store
	key  string
	once atomic.Bool
	read atomic.Int32
}

func (g *getFails) Get(ctx context.Context, key string) (store.Object, error) {
	if key == g.key && g.once.CompareAndSwap(false, true) {
		return store.Object{}, fmt.Errorf("reading: %w", store.ErrUnavailable)
	}
	obj, err := g.Store.Get(ctx, key)
	if err == nil && strings.HasPrefix(key, Prefix) {
		g.read.Add(1)
	}
	return obj, err
}

// A read of the fleet's reports that fails midway keeps what it read: the next read
// GETs only the reports still missing (else a cold view too slow to finish within
// ingressViewTimeout would start over, and fail, every time).
func TestAFailedReadOfTheIngressReportsKeepsWhatItRead(t *testing.T) {
	for _, be := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"dir", func(t *testing.T) store.Store {
			st, err := dir.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"s3", func(t *testing.T) store.Store { // a bucket of a real MinIO (package s3test)
			st, err := s3.New(t.Context(), s3test.Shared(t).NewBucket(t))
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			aFailedReadKeepsWhatItRead(t, be.open(t))
		})
	}
}

func aFailedReadKeepsWhatItRead(t *testing.T, st store.Store) {
	const reports = 60
	for i := range reports {
		b, _ := json.Marshal(Report{Name: fmt.Sprintf("edge-%03d", i), Kind: api.KindPlugin, Node: "vps-b", Serial: 1, Seen: time.Now().UTC()})
		if _, err := st.Put(t.Context(), fmt.Sprintf("%sedge-%03d.json", Prefix, i), b, store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	gf := &getFails{Store: st, key: Prefix + "edge-030.json"}
	book := New(Options{Store: gf, Log: slog.New(slog.DiscardHandler), Self: "vps-a",
		Config: Config{LostAfter: ptypes.Duration(time.Minute), ForgetAfter: ptypes.Duration(time.Hour), MaxTracked: 8},
		Known:  func() (uint64, string) { return 1, "" }, Current: func() (string, uint64) { return "", 1 }})
	// A view of age 0 reads the store every time; this book has no local report, so
	// the view is the reports read.
	v := book.Fleet(t.Context(), 0)
	first := int(gf.read.Load())
	if v.Error == "" || !strings.Contains(v.Error, "edge-030") || len(v.Ingresses) != first || first >= reports {
		t.Fatalf("a read with edge-030 failing: %d reports, error %q (%d read); want the error and the ones read", len(v.Ingresses), v.Error, first)
	}
	v = book.Fleet(t.Context(), 0)
	if v.Error != "" || len(v.Ingresses) != reports {
		t.Fatalf("the next read: %d reports, error %q; want all %d", len(v.Ingresses), v.Error, reports)
	}
	if again := int(gf.read.Load()) - first; again != reports-first {
		t.Errorf("the next read GET %d reports, want the %d still missing (the first read got %d)", again, reports-first, first)
	}
	t.Logf("the failed read got %d of %d reports; the next one GET the %d others", first, reports, reports-first)
}
