package s3_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/s3"
	"github.com/scafo/ingress/node/store/s3/s3test"
	"github.com/scafo/ingress/node/store/storetest"
)

func TestMain(m *testing.M) { s3test.Main(m) }

func newStore(t *testing.T, cfg s3.Config) *s3.Store {
	t.Helper()
	st, err := s3.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The suite against a real S3 server, a fresh bucket per subtest.
func TestConformance(t *testing.T) {
	srv := s3test.Shared(t)
	// Each successful increment costs MinIO ~40 ms under this contention on 2 cores:
	// 100 goroutines × 3 keep the two concurrency subtests near 10 s each.
	storetest.RunOptions(t, func(t *testing.T) store.Store {
		return newStore(t, srv.NewBucket(t))
	}, storetest.Options{Increments: 3, PutRaw: func(t *testing.T, s store.Store, key string, value []byte) {
		client, err := srv.Client()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.PutObject(t.Context(), s.(*s3.Store).Bucket(), key, bytes.NewReader(value), int64(len(value)), minio.PutObjectOptions{}); err != nil {
			t.Fatalf("raw put: %v", err)
		}
	}})
}

// A store with a key prefix ("/f/" trimmed to "f/") reads and writes only under it, in
// a bucket it shares with other fleets: its objects are named <prefix><key>, and List
// skips other fleets' objects and names that are not keys (console "folders", hidden).
func TestPrefixIsPartOfTheObjectName(t *testing.T) {
	srv := s3test.Shared(t)
	cfg := srv.NewBucket(t)
	cfg.Prefix = "/f/"
	st := newStore(t, cfg)
	ctx := t.Context()
	etag, err := st.Put(ctx, "apps/shop.json", []byte("{}"), store.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f/apps/", "f/apps/.hidden", "f/apps/ok.json", "f-other/apps/x.json", "apps/outside.json"} {
		if _, err := client.PutObject(ctx, cfg.Bucket, name, bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatalf("raw put %s: %v", name, err)
		}
	}
	if _, err := client.StatObject(ctx, cfg.Bucket, "f/apps/shop.json", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("apps/shop.json is not the object f/apps/shop.json: %v", err)
	}
	for _, prefix := range []string{"", "apps/"} {
		got, err := st.List(ctx, prefix)
		if err != nil || len(got) != 2 || got[0].Key != "apps/ok.json" || got[1].Key != "apps/shop.json" || got[1].ETag != etag {
			t.Fatalf("List(%q) = %+v, %v; want only apps/ok.json and apps/shop.json", prefix, got, err)
		}
	}
	if _, err := st.Get(ctx, "apps/outside.json"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of another fleet's object: %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx, "apps/shop.json", etag); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StatObject(ctx, cfg.Bucket, "f/apps/shop.json", minio.StatObjectOptions{}); err == nil {
		t.Fatal("f/apps/shop.json still there after Delete(apps/shop.json)")
	}
}

// An idle reconcile tick must cost one request: a conditional GET answered 304.
func TestGetIfChangedIsOneConditionalRequest(t *testing.T) {
	st := newStore(t, s3test.Shared(t).NewBucket(t))
	etag, err := st.Put(t.Context(), "serial", []byte("7"), store.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	before := st.Stats()
	for range 5 {
		if _, changed, err := st.GetIfChanged(t.Context(), "serial", etag); err != nil || changed {
			t.Fatalf("GetIfChanged = changed %v, err %v; want false, nil", changed, err)
		}
	}
	d := st.Stats().Sub(before)
	if d.Requests != 5 || d.ByMethod["GET"] != 5 || d.NotModified != 5 {
		t.Fatalf("5 idle GetIfChanged cost %+v, want 5 GETs all answered 304", d)
	}

	before = st.Stats()
	if _, err := st.Put(t.Context(), "serial", []byte("8"), store.Condition{IfMatch: etag}); err != nil {
		t.Fatal(err)
	}
	obj, changed, err := st.GetIfChanged(t.Context(), "serial", etag)
	if err != nil || !changed || string(obj.Value) != "8" {
		t.Fatalf("GetIfChanged after a write = %q, %v, %v", obj.Value, changed, err)
	}
	if d := st.Stats().Sub(before); d.Requests != 2 || d.ByMethod["PUT"] != 1 || d.ByMethod["GET"] != 1 {
		t.Fatalf("a write and a changed read cost %+v, want 1 PUT + 1 GET", d)
	}
}

// The 412s come from the server, not from a local check: each refused write is one PUT
// on the wire, and the object is untouched.
func TestServerEnforcesConditionalPuts(t *testing.T) {
	st := newStore(t, s3test.Shared(t).NewBucket(t))
	ctx := t.Context()
	e1, err := st.Put(ctx, "k", []byte("v1"), store.Condition{IfNoneMatch: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cond store.Condition
	}{
		{"If-None-Match: * on an existing object", store.Condition{IfNoneMatch: true}},
		{"If-Match with a stale etag", store.Condition{IfMatch: "0123456789abcdef0123456789abcdef"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := st.Stats()
			_, err := st.Put(ctx, "k", []byte("v2"), tc.cond)
			if !errors.Is(err, store.ErrPreconditionFailed) {
				t.Fatalf("err = %v, want ErrPreconditionFailed", err)
			}
			if d := st.Stats().Sub(before); d.ByMethod["PUT"] != 1 || d.Requests != 1 {
				t.Fatalf("refused write cost %+v, want exactly one PUT", d)
			}
			obj, err := st.Get(ctx, "k")
			if err != nil || string(obj.Value) != "v1" || obj.ETag != e1 {
				t.Fatalf("after refused write: %q (etag %q), %v; want v1 (etag %q)", obj.Value, obj.ETag, err, e1)
			}
		})
	}
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Every operation against a server that cannot be reached, or that refuses us, is
// ErrUnavailable: never ErrNotFound, which a reader would take for "deleted". The
// start's check (Explain) names the setting to fix, in its error too.
func TestFailuresAreUnavailable(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(t *testing.T) s3.Config
		setting string
	}{
		{"connection refused", func(t *testing.T) s3.Config {
			return s3.Config{Endpoint: closedPort(t), Bucket: "b-x", Insecure: true, Region: "us-east-1", MaxRetries: 1,
				AccessKeyID: "id", SecretAccessKey: "secret"}
		}, "store.s3.endpoint"},
		{"missing bucket", func(t *testing.T) s3.Config {
			return s3test.Shared(t).Config(s3test.BucketName("missing"))
		}, "store.s3.bucket"},
		{"wrong secret", func(t *testing.T) s3.Config {
			cfg := s3test.Shared(t).NewBucket(t)
			cfg.SecretAccessKey = "not-the-secret-at-all"
			return cfg
		}, "store.s3.accessKeyID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg(t)
			st := newStore(t, cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, store.ErrUnavailable) {
					t.Errorf("%s: err = %v, want ErrUnavailable", op, err)
				}
				if err != nil && cfg.SecretAccessKey != "" && strings.Contains(err.Error(), cfg.SecretAccessKey) {
					t.Errorf("%s: error shows the secret: %v", op, err)
				}
			}
			_, err := st.Get(ctx, "serial")
			check("Get", err)
			_, _, err = st.GetIfChanged(ctx, "serial", "abc")
			check("GetIfChanged", err)
			_, err = st.List(ctx, "apps/")
			check("List", err)
			_, err = st.Put(ctx, "serial", []byte("1"), store.Condition{IfNoneMatch: true})
			check("Put", err)
			_, err = st.Put(ctx, "serial", []byte("1"), store.Condition{IfMatch: "abc"})
			check("Put If-Match", err)
			if tc.name != "missing bucket" { // a HEAD on a missing bucket reads as a missing key
				check("Delete", st.Delete(ctx, "serial", ""))
			}
			err = st.CheckBucket(ctx)
			check("CheckBucket", err)
			c := store.S3Config{Endpoint: cfg.Endpoint, Bucket: cfg.Bucket}
			named := tc.setting
			if named == "store.s3.endpoint" {
				named += " " + cfg.Endpoint // the address refused, not only the setting
			}
			if setting, err := s3.Explain(c, err); setting != tc.setting || err == nil || !strings.Contains(err.Error(), named) {
				t.Errorf("Explain: %s, %v; want %s named", setting, err, named)
			}
		})
	}
}

// A stopped server fails fast with ErrUnavailable and the store works again, data
// intact, once the server is back.
func TestStoreRecoversWhenServerReturns(t *testing.T) {
	srv := s3test.Start(t)
	cfg := srv.NewBucket(t)
	cfg.MaxRetries = 1
	st := newStore(t, cfg)
	etag, err := st.Put(t.Context(), "serial", []byte("41"), store.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = st.GetIfChanged(t.Context(), "serial", etag)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GetIfChanged while down: err = %v, want ErrUnavailable", err)
	}
	if _, err := st.Put(t.Context(), "serial", []byte("42"), store.Condition{IfMatch: etag}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Put while down: err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("two calls against a stopped server took %v, want a fast failure", d)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	obj, err := st.Get(t.Context(), "serial")
	if err != nil || string(obj.Value) != "41" || obj.ETag != etag {
		t.Fatalf("after restart: %q (etag %q), %v; want 41 (etag %q)", obj.Value, obj.ETag, err, etag)
	}
	if _, err := st.Put(t.Context(), "serial", []byte("42"), store.Condition{IfMatch: etag}); err != nil {
		t.Fatalf("Put after restart: %v", err)
	}
}

func TestConfigNeverShowsCredentials(t *testing.T) {
	cfg := s3.Config{Endpoint: "s3.example.test", Bucket: "fleet", AccessKeyID: "AKIAEXAMPLEID", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("store", "config", cfg)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg),
		"%s": fmt.Sprintf("%s", cfg), "pointer %v": fmt.Sprintf("%v", &cfg),
		"slog": logged.String(), "json": string(js),
	}
	for how, out := range outputs {
		if strings.Contains(out, cfg.SecretAccessKey) || strings.Contains(out, cfg.AccessKeyID) {
			t.Errorf("%s shows a credential: %s", how, out)
		}
		if !strings.Contains(out, "fleet") {
			t.Errorf("%s lost the bucket: %s", how, out)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := s3.Config{Endpoint: "127.0.0.1:9000", Bucket: "fleet", AccessKeyID: "id", SecretAccessKey: "sekr3t-value", Insecure: true}
	tests := []struct {
		name    string
		mutate  func(*s3.Config)
		wantErr string // "" = accepted
	}{
		{"good", func(*s3.Config) {}, ""},
		{"http scheme", func(c *s3.Config) { c.Endpoint = "http://127.0.0.1:9000"; c.Insecure = false }, ""},
		{"anonymous", func(c *s3.Config) { c.AccessKeyID, c.SecretAccessKey = "", "" }, ""},
		{"prefix with slashes", func(c *s3.Config) { c.Prefix = "/fleet-a/" }, ""},
		{"no endpoint", func(c *s3.Config) { c.Endpoint = "" }, "endpoint"},
		{"endpoint with path", func(c *s3.Config) { c.Endpoint = "http://h:9000/bucket" }, "endpoint"},
		{"https but insecure", func(c *s3.Config) { c.Endpoint = "https://h" }, "insecure"},
		{"ftp scheme", func(c *s3.Config) { c.Endpoint = "ftp://h" }, "scheme"},
		{"no bucket", func(c *s3.Config) { c.Bucket = "" }, "bucket"},
		{"bad bucket", func(c *s3.Config) { c.Bucket = "Fleet_A" }, "bucket"},
		{"bad prefix", func(c *s3.Config) { c.Prefix = "a/../b" }, "prefix"},
		{"secret without id", func(c *s3.Config) { c.AccessKeyID = "" }, "accessKeyID"},
		// An endpoint holding a credential: refused, and the error does not repeat it.
		{"credential in a URL", func(c *s3.Config) { c.Endpoint, c.Insecure = "https://AKIA:sekr3t-value@s3.example.com", false }, "endpoint"},
		{"credential in a URL with a path", func(c *s3.Config) { c.Endpoint, c.Insecure = "https://AKIA:sekr3t-value@h/x?y", false }, "endpoint"},
		{"credential in host:port", func(c *s3.Config) { c.Endpoint = "AKIA:sekr3t-value@s3.example.com" }, "endpoint"},
		{"negative retries", func(c *s3.Config) { c.MaxRetries = -1 }, "maxRetries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.mutate(&cfg)
			_, err := s3.New(t.Context(), cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New err = %v, want one mentioning %q", err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), good.SecretAccessKey) {
				t.Errorf("error shows the secret: %v", err)
			}
		})
	}
}

// A LIST pages: 1 001 keys take two ListObjectsV2 requests (S3 answers at most 1 000
// keys a page; minio-go follows the continuation token), and every key comes back, with
// its modification time.
func TestListPages(t *testing.T) {
	st := newStore(t, s3test.Shared(t).NewBucket(t))
	const n = 1001
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := st.Put(t.Context(), fmt.Sprintf("nodes/n%04d.json", i), []byte("{}"), store.Condition{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	before := st.Stats()
	es, err := st.List(t.Context(), "nodes/")
	if err != nil {
		t.Fatal(err)
	}
	d := st.Stats().Sub(before)
	if len(es) != n || es[0].Key != "nodes/n0000.json" || es[n-1].Key != "nodes/n1000.json" {
		t.Fatalf("List = %d entries (%v … %v), want %d", len(es), es[0], es[len(es)-1], n)
	}
	for _, e := range es {
		if e.ModTime.IsZero() {
			t.Fatalf("%s: no modification time", e.Key)
		}
	}
	if d.Requests != 2 || d.ByMethod["GET"] != 2 {
		t.Fatalf("listing %d keys cost %+v, want two pages (2 GETs)", n, d)
	}
}
