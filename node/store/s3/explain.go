package s3

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7"

	"github.com/scafo/ingress/node/store"
)

// Explain turns a failed S3 call into what the operator fixes: the setting at
// fault (store.s3.bucket, store.s3.insecure, store.s3.accessKeyID/secretAccessKey,
// store.s3.endpoint; "store.s3" when it cannot tell) and an error naming it.
func Explain(c store.S3Config, err error) (string, error) {
	msg := err.Error()
	var er minio.ErrorResponse
	hasResp := errors.As(err, &er)
	switch {
	case strings.Contains(msg, "no such bucket") || (hasResp && er.Code == "NoSuchBucket"):
		return "store.s3.bucket", fmt.Errorf("store.s3.bucket %q: no such bucket at %s (create it with scafo-node store init, or name the right one)", c.Bucket, c.Endpoint)
	case hasResp && er.Code == "InvalidBucketName":
		return "store.s3.bucket", fmt.Errorf("store.s3.bucket %q is not a valid bucket name: %s", c.Bucket, er.Message)
	case hasResp && er.Code == "BucketAlreadyExists":
		return "store.s3.bucket", fmt.Errorf("store.s3.bucket %q belongs to another account: choose another name", c.Bucket)
	case hasResp && (er.Code == "InvalidAccessKeyId" || er.Code == "SignatureDoesNotMatch" || er.Code == "AccessDenied" ||
		er.Code == "InvalidToken" || er.Code == "ExpiredToken" || er.StatusCode == 403):
		return "store.s3.accessKeyID", fmt.Errorf("store.s3.accessKeyID and store.s3.secretAccessKey (SCAFO_STORE_S3_ACCESSKEYID, SCAFO_STORE_S3_SECRETACCESSKEY): %s refused the credentials (%s)", c.Endpoint, er.Code)
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return "store.s3.insecure", fmt.Errorf("store.s3.insecure is false but %s speaks plain HTTP: set store.s3.insecure=true, or give the endpoint TLS", c.Endpoint)
	case c.Insecure && (strings.Contains(msg, "HTTP request to an HTTPS server") || strings.Contains(msg, "malformed HTTP") ||
		(hasResp && er.StatusCode == 400)):
		return "store.s3.insecure", fmt.Errorf("store.s3.insecure is true but %s speaks HTTPS: set store.s3.insecure=false", c.Endpoint)
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:"):
		return "store.s3.insecure", fmt.Errorf("TLS to %s failed (store.s3.insecure is false; true for a plain-HTTP endpoint): %v", c.Endpoint, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "store.s3.endpoint", fmt.Errorf("store.s3.endpoint %s refused the connection: %v", c.Endpoint, err)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "store.s3.endpoint", fmt.Errorf("store.s3.endpoint %s does not resolve: %v", c.Endpoint, err)
	}
	return "store.s3", fmt.Errorf("store.s3 (endpoint %s, bucket %q): %v", c.Endpoint, c.Bucket, err)
}
