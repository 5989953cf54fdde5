package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store/s3/s3test"
)

// TestStoreInitCreatesTheBucketOnceAndNamesTheSettingAtFault: `scafo-node store init`
// against a real MinIO creates the bucket, finds it the second time, and every
// misconfiguration an operator makes is refused naming the setting to fix.
func TestStoreInitCreatesTheBucketOnceAndNamesTheSettingAtFault(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts MinIO")
	}
	srv := s3test.Start(t)
	base := func() *node.Config {
		cfg := node.NewConfig()
		cfg.Store.S3 = node.S3StoreConfig{Endpoint: srv.Endpoint, Bucket: "fleet-init", Region: srv.Region,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
		if !strings.Contains(srv.Endpoint, "://") {
			cfg.Store.S3.Insecure = true
		}
		return cfg
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, want := range []string{"created", "exists: nothing to do"} {
		var out bytes.Buffer
		if err := storeInit(ctx, base(), &out); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "/fleet-init") {
			t.Fatalf("run %d said %q, want %q", i+1, out.String(), want)
		}
	}
	for _, tc := range []struct {
		name    string
		change  func(*node.Config)
		wantErr string
	}{
		{"wrong secret", func(c *node.Config) { c.Store.S3.SecretAccessKey = "not-the-secret" }, "store.s3.secretAccessKey"},
		{"unknown key", func(c *node.Config) { c.Store.S3.AccessKeyID = "nobody" }, "refused the credentials"},
		{"TLS against plain HTTP", func(c *node.Config) {
			c.Store.S3.Insecure = false
			c.Store.S3.Endpoint = strings.TrimPrefix(c.Store.S3.Endpoint, "http://")
		}, "store.s3.insecure is false"},
		{"no bucket named", func(c *node.Config) { c.Store.S3.Bucket = "" }, "store.s3.bucket is empty"},
		{"invalid bucket name", func(c *node.Config) { c.Store.S3.Bucket = "Fleet_A" }, `store.s3: s3 store: bucket "Fleet_A"`},
		{"nothing listens", func(c *node.Config) { c.Store.S3.Endpoint = "127.0.0.1:1" }, "store.s3.endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.change(cfg)
			var out bytes.Buffer
			err := storeInit(ctx, cfg, &out)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v (said %q), want an error containing %q", err, out.String(), tc.wantErr)
			}
		})
	}
}

// TestStoreInitCreatesTheDirStore: without store.s3.endpoint, the directory store
// (<stateDir>/store by default) is created, and found the second time.
func TestStoreInitCreatesTheDirStore(t *testing.T) {
	cfg := node.NewConfig()
	cfg.StateDir = t.TempDir()
	cfg.Store.Dir.Path = ""
	for i, want := range []string{"created", "exists: nothing to do"} {
		var out bytes.Buffer
		if err := storeInit(context.Background(), cfg, &out); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(cfg.StateDir, "store")
		if got := out.String(); got != "store dir:"+path+" "+want+"\n" {
			t.Fatalf("run %d said %q", i+1, got)
		}
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			t.Fatalf("run %d: %s: %v", i+1, path, err)
		}
	}
}
