package s3

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/scafo/ingress/node/store"
)

// TestExplainNamesTheSetting: each failure the start's check meets names the setting
// an operator fixes, and the error names it too.
func TestExplainNamesTheSetting(t *testing.T) {
	c := store.S3Config{Endpoint: "s3.example.com", Bucket: "scafo"}
	insecure := c
	insecure.Insecure = true
	for _, tc := range []struct {
		name    string
		c       store.S3Config
		err     error
		setting string
		sub     string
	}{
		{"no bucket", c, minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, "store.s3.bucket", "no such bucket"},
		{"bad bucket name", c, minio.ErrorResponse{Code: "InvalidBucketName", Message: "bad"}, "store.s3.bucket", "not a valid bucket name"},
		{"another account's bucket", c, minio.ErrorResponse{Code: "BucketAlreadyExists"}, "store.s3.bucket", "another account"},
		{"credentials", c, minio.ErrorResponse{Code: "SignatureDoesNotMatch", StatusCode: 403}, "store.s3.accessKeyID", "refused the credentials"},
		{"plain HTTP endpoint", c, errors.New("http: server gave HTTP response to HTTPS client"), "store.s3.insecure", "store.s3.insecure is false"},
		{"TLS endpoint, insecure", insecure, errors.New("malformed HTTP response"), "store.s3.insecure", "store.s3.insecure is true"},
		{"certificate", c, errors.New("tls: failed to verify certificate: x509: unknown authority"), "store.s3.insecure", "TLS to s3.example.com failed"},
		{"refused", c, fmt.Errorf("dial: %w", syscall.ECONNREFUSED), "store.s3.endpoint", "refused the connection"},
		{"something else", c, errors.New("teapot"), "store.s3", "teapot"},
	} {
		setting, err := Explain(tc.c, tc.err)
		if setting != tc.setting || err == nil || !strings.Contains(err.Error(), tc.sub) || !strings.Contains(err.Error(), tc.setting) {
			t.Errorf("%s: %q, %v; want %q and an error containing %q", tc.name, setting, err, tc.setting, tc.sub)
		}
	}
}
