package node_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/listengate"
	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store/s3/s3test"
)

// TestStoreMisconfigurationNamesTheSetting: against a real S3 server (MinIO), a node
// whose bucket does not exist, whose TLS setting does not match the endpoint, or whose
// credentials are refused logs an ERROR at start naming store.s3.bucket,
// store.s3.insecure or the credentials (it logged only WARN lines naming no setting),
// and does not report ready on a store it has never read.
func TestStoreMisconfigurationNamesTheSetting(t *testing.T) {
	srv := s3test.Shared(t)
	good := srv.NewBucket(t)
	for _, tc := range []struct {
		name    string
		edit    func(c *node.S3StoreConfig)
		setting string
		want    string
	}{
		{"no such bucket", func(c *node.S3StoreConfig) { c.Bucket = "scafo-no-such-bucket" }, "store.s3.bucket", `scafo-no-such-bucket\": no such bucket at`},
		{"TLS against plain HTTP", func(c *node.S3StoreConfig) { c.Insecure = false }, "store.s3.insecure", "store.s3.insecure is false but"},
		{"wrong secret", func(c *node.S3StoreConfig) { c.SecretAccessKey = "not-the-secret" }, "store.s3.accessKeyID", "store.s3.secretAccessKey"},
		{"wrong key id", func(c *node.S3StoreConfig) { c.AccessKeyID = "nobody" }, "store.s3.accessKeyID", "store.s3.accessKeyID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(srv.Endpoint, "https://") && tc.setting == "store.s3.insecure" {
				t.Skip("the server speaks TLS")
			}
			cfg := testConfig(t, "vps-a", t.TempDir())
			cfg.Store.S3 = node.S3StoreConfig{Endpoint: strings.TrimPrefix(srv.Endpoint, "http://"), Bucket: good.Bucket, Region: good.Region,
				AccessKeyID: good.AccessKeyID, SecretAccessKey: good.SecretAccessKey, Insecure: good.Insecure}
			tc.edit(&cfg.Store.S3)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			logs := &proc.Buffer{}
			log := slog.New(slog.NewTextHandler(logs, nil))
			ln, err := listengate.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Node.APIPort = node.PortOf(ln.Addr().String())
			srvNode, err := node.New(t.Context(), cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srvNode.Run(ctx, ln) }()
			defer func() { cancel(); <-done }()
			base := "http://" + ln.Addr().String()
			waitFor(t, 15*time.Second, "the start line", func() bool { return strings.Contains(logs.String(), "scafo-node serving") })
			// The start line names the store in use.
			if want := "store=s3://" + cfg.Store.S3.Endpoint + "/" + cfg.Store.S3.Bucket + " "; !strings.Contains(logs.String(), want) {
				t.Errorf("the start line does not say %q:\n%s", want, logs.String())
			}
			line := ""
			for l := range strings.SplitSeq(logs.String(), "\n") {
				if strings.Contains(l, "level=ERROR") && strings.Contains(l, "setting="+tc.setting) {
					line = l
				}
			}
			if line == "" || !strings.Contains(line, tc.want) {
				t.Fatalf("no ERROR naming %s (%q) at start:\n%s", tc.setting, tc.want, logs.String())
			}
			for range 3 { // after each of three more (failed) passes
				testnode.WaitPassesAt(t, base, 1, time.Duration(cfg.Reconcile.Interval))
				resp, err := http.Get(base + "/v1/readyz")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.Fatalf("readyz 200 on a store the node has never read")
				}
			}
		})
	}
}
