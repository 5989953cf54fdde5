package s3_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/s3"
	"github.com/scafo/ingress/node/store/s3/s3test"
)

// TestCheckAtStart: against a real S3 server (MinIO), a reachable bucket passes the
// start's check and logs nothing; a bucket that does not exist is an ERROR naming
// store.s3.bucket, and the error returned names it too. (A node's start with each
// misconfiguration is the root's TestStoreMisconfigurationNamesTheSetting.)
func TestCheckAtStart(t *testing.T) {
	srv := s3test.Shared(t)
	good := srv.NewBucket(t)
	st, err := s3.New(t.Context(), good)
	if err != nil {
		t.Fatal(err)
	}
	logs := &proc.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	c := store.S3Config{Endpoint: good.Endpoint, Bucket: good.Bucket}
	if err := s3.CheckAtStart(t.Context(), c, st, log); err != nil || logs.String() != "" {
		t.Fatalf("a reachable bucket: %v, logged %q", err, logs.String())
	}
	missing := good
	missing.Bucket = "scafo-no-such-bucket"
	st, err = s3.New(t.Context(), missing)
	if err != nil {
		t.Fatal(err)
	}
	c.Bucket = missing.Bucket
	err = s3.CheckAtStart(t.Context(), c, st, log)
	if err == nil || !strings.Contains(err.Error(), "store.s3.bucket") {
		t.Fatalf("a missing bucket: %v, want an error naming store.s3.bucket", err)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "setting=store.s3.bucket") {
		t.Fatalf("a missing bucket logged %q, want an ERROR naming store.s3.bucket", l)
	}
}
