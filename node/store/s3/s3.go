// Package s3 is the S3 backend of the fleet-state store: one object per key in a bucket
// of any S3-compatible server (AWS S3, MinIO, R2, Garage…), for fleets of nodes.
//
// Key "apps/shop.json" is the object <prefix>apps/shop.json, where the optional prefix
// lets several fleets share a bucket. ETags are the server's, unquoted (an MD5 hex on
// MinIO and AWS for these small single-part objects); they are opaque.
//
// Every write is one PUT, atomic on the server. Conditions map to HTTP preconditions the
// server evaluates under its own lock: Condition.IfMatch is "If-Match: <etag>" (CAS),
// Condition.IfNoneMatch is "If-None-Match: *" (create-only); a lost race answers 412 and
// is returned as store.ErrPreconditionFailed. GetIfChanged is a GET with
// "If-None-Match: <etag>": a 304 costs no body.
//
// Delete is the exception: S3 DeleteObject has no precondition on most servers
// (MinIO ignores If-Match on DELETE), so Delete stats the object, compares the etag and
// then deletes. A write that lands between the stat and the delete is deleted with it.
// Callers must not rely on Delete's ifMatch to protect a concurrently rewritten key.
//
// Errors: 404 is store.ErrNotFound; 412 (and 409 ConditionalRequestConflict) is
// store.ErrPreconditionFailed; network errors, timeouts, 5xx, a missing bucket and
// refused credentials wrap store.ErrUnavailable (a node keeps its last document).
//
// Retries: the minio-go client retries network errors and 5xx (Config.MaxRetries). A
// conditional PUT whose answer was lost and whose retry then finds its own write answers
// 412, so a writer can see ErrPreconditionFailed for a write that landed; a CAS loop then
// rereads and sees its own value. Only an unreachable answer can cause this.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/scafo/ingress/node/store"
)

// Config locates the bucket. Its String, GoString, LogValue and MarshalJSON never show
// the credentials.
type Config struct {
	// Endpoint is host[:port] of the S3 API ("s3.eu-west-1.amazonaws.com",
	// "127.0.0.1:9000"). A scheme is accepted: "http://" implies Insecure, "https://"
	// forbids it.
	Endpoint string
	// Bucket holds the fleet's objects. It must exist (see CreateBucket).
	Bucket string
	// Prefix, optional, is put before every key ("fleet-a" stores "apps/x.json" as
	// "fleet-a/apps/x.json"), so several fleets can share a bucket.
	Prefix string
	// Region, optional; when empty the client asks the server once.
	Region string
	// AccessKeyID and SecretAccessKey are static credentials; both empty means
	// anonymous access.
	AccessKeyID     string
	SecretAccessKey string
	// Insecure selects plain HTTP instead of HTTPS.
	Insecure bool
	// MaxRetries is how many times one request is tried on network errors and 5xx
	// (default 3; 1 disables retries).
	MaxRetries int
}

const redacted = "[redacted]"

func redact(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

func (c Config) safe() map[string]any {
	return map[string]any{
		"endpoint": c.Endpoint, "bucket": c.Bucket, "prefix": c.Prefix, "region": c.Region,
		"insecure": c.Insecure, "accessKeyID": redact(c.AccessKeyID), "secretAccessKey": redact(c.SecretAccessKey),
	}
}

// String describes the configuration with the credentials redacted.
func (c Config) String() string {
	return fmt.Sprintf("s3{endpoint=%s bucket=%s prefix=%q region=%q insecure=%t accessKeyID=%s secretAccessKey=%s}",
		c.Endpoint, c.Bucket, c.Prefix, c.Region, c.Insecure, redact(c.AccessKeyID), redact(c.SecretAccessKey))
}

// GoString is String, so %#v does not print the credentials either.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration with the credentials redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("endpoint", c.Endpoint), slog.String("bucket", c.Bucket),
		slog.String("prefix", c.Prefix), slog.String("region", c.Region),
		slog.Bool("insecure", c.Insecure),
		slog.String("accessKeyID", redact(c.AccessKeyID)),
		slog.String("secretAccessKey", redact(c.SecretAccessKey)),
	)
}

// MarshalJSON encodes the configuration with the credentials redacted (for status
// pages and config dumps).
func (c Config) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"endpoint":%q,"bucket":%q,"prefix":%q,"region":%q,"insecure":%t,"accessKeyID":%q,"secretAccessKey":%q}`,
		c.Endpoint, c.Bucket, c.Prefix, c.Region, c.Insecure, redact(c.AccessKeyID), redact(c.SecretAccessKey))
	return b.Bytes(), nil
}

// Store is an S3-backed store.Store. Safe for concurrent use.
type Store struct {
	client *minio.Client
	core   minio.Core
	bucket string
	prefix string // "" or "<prefix>/"
	stats  *counter
}

var _ store.Store = (*Store)(nil)

// New validates cfg and builds a client. It sends no request, so a node can start while
// the server is down (and answer "draining" until its first read succeeds).
func New(ctx context.Context, cfg Config) (*Store, error) {
	_ = ctx // reserved: New does no I/O
	endpoint, secure, err := parseEndpoint(cfg.Endpoint, cfg.Insecure)
	if err != nil {
		return nil, fmt.Errorf("s3 store: endpoint: %w", err)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("s3 store: bucket is empty")
	}
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("s3 store: bucket %q: %w", cfg.Bucket, err)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := store.CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("s3 store: prefix: %w", err)
		}
		prefix += "/"
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("s3 store: set both accessKeyID and secretAccessKey, or neither")
	}
	if cfg.MaxRetries < 0 {
		return nil, fmt.Errorf("s3 store: maxRetries %d is negative", cfg.MaxRetries)
	}
	retries := cfg.MaxRetries
	if retries == 0 {
		retries = 3
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("s3 store: transport: %w", err)
	}
	tr.DialContext = (&netDialer).DialContext
	tr.ResponseHeaderTimeout = 30 * time.Second
	stats := &counter{next: tr}
	var creds *credentials.Credentials
	if cfg.AccessKeyID != "" {
		creds = credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, "")
	} else {
		creds = credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
	}
	client, err := minio.New(endpoint, &minio.Options{
		Creds:      creds,
		Secure:     secure,
		Transport:  stats,
		Region:     cfg.Region,
		MaxRetries: retries,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 store: client for %s: %w", endpoint, err)
	}
	return &Store{client: client, core: minio.Core{Client: client}, bucket: cfg.Bucket, prefix: prefix, stats: stats}, nil
}

func parseEndpoint(ep string, insecure bool) (hostport string, secure bool, err error) {
	if ep == "" {
		return "", false, errors.New("empty")
	}
	secure = !insecure
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return "", false, fmt.Errorf("%q: not a URL", redactEndpoint(ep))
		}
		switch u.Scheme {
		case "http":
			secure = false
		case "https":
			if insecure {
				return "", false, fmt.Errorf("%q is https but insecure is set", ep)
			}
		default:
			return "", false, fmt.Errorf("%q: scheme must be http or https", ep)
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
			return "", false, fmt.Errorf("%q: want host[:port] only, no path, query or user", redactEndpoint(ep))
		}
		ep = u.Host
	}
	if ep == "" || strings.ContainsAny(ep, "/?#@ ") {
		return "", false, fmt.Errorf("%q: want host[:port]", redactEndpoint(ep))
	}
	return ep, secure, nil
}

// redactEndpoint is ep for an error message: whatever precedes its last '@' after the
// scheme (a user and password written into the endpoint) is replaced by "…".
func redactEndpoint(ep string) string {
	i := strings.LastIndex(ep, "@")
	if i < 0 {
		return ep
	}
	start := 0
	if j := strings.Index(ep, "://"); j >= 0 && j < i {
		start = j + 3
	}
	return ep[:start] + "…" + ep[i:]
}

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// CreateBucket creates the bucket if it does not exist yet (setup and tests; a fleet's
// nodes expect it to exist).
func (s *Store) CreateBucket(ctx context.Context, region string) error {
	err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if err == nil {
		return nil
	}
	if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" {
		return nil
	}
	return fmt.Errorf("s3 store: creating bucket %q: %w", s.bucket, classify(err))
}

// CheckBucket reports whether the bucket is reachable: nil, or an error wrapping
// store.ErrUnavailable that says why (for startup logs and status pages).
func (s *Store) CheckBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("s3 store: bucket %q: %w", s.bucket, classify(err))
	}
	if !ok {
		return fmt.Errorf("s3 store: bucket %q: %w: no such bucket", s.bucket, store.ErrUnavailable)
	}
	return nil
}

func (s *Store) name(key string) (string, error) {
	if err := store.CheckKey(key); err != nil {
		return "", fmt.Errorf("s3 store: %w", err)
	}
	return s.prefix + key, nil
}

// Get reads one object.
func (s *Store) Get(ctx context.Context, key string) (store.Object, error) {
	obj, _, err := s.get(ctx, key, "")
	return obj, err
}

// GetIfChanged reads key with "If-None-Match: etag": a 304 returns changed=false.
func (s *Store) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	return s.get(ctx, key, etag)
}

func (s *Store) get(ctx context.Context, key, etag string) (store.Object, bool, error) {
	name, err := s.name(key)
	if err != nil {
		return store.Object{}, false, err
	}
	var opts minio.GetObjectOptions
	if etag != "" {
		if err := opts.SetMatchETagExcept(etag); err != nil {
			return store.Object{}, false, fmt.Errorf("s3 store: get %q: %w", key, err)
		}
	}
	body, info, _, err := s.core.GetObject(ctx, s.bucket, name, opts)
	if err != nil {
		if etag != "" && statusOf(err) == http.StatusNotModified {
			return store.Object{}, false, nil
		}
		return store.Object{}, false, fmt.Errorf("s3 store: get %q: %w", key, classify(err))
	}
	defer body.Close()
	if info.Size > store.MaxObjectSize {
		// Not read: a corrupt or hostile object must not exhaust every node's memory.
		return store.Object{}, false, fmt.Errorf("s3 store: get %q: %w: %d bytes", key, store.ErrTooLarge, info.Size)
	}
	b, err := io.ReadAll(io.LimitReader(body, store.MaxObjectSize+1))
	if err != nil {
		return store.Object{}, false, fmt.Errorf("s3 store: get %q: reading body: %w", key, classify(err))
	}
	if len(b) > store.MaxObjectSize {
		return store.Object{}, false, fmt.Errorf("s3 store: get %q: %w: more than %d bytes", key, store.ErrTooLarge, store.MaxObjectSize)
	}
	if info.Size >= 0 && int64(len(b)) != info.Size {
		return store.Object{}, false, fmt.Errorf("s3 store: get %q: %w: short body (%d of %d bytes)", key, store.ErrUnavailable, len(b), info.Size)
	}
	return store.Object{Key: key, Value: b, ETag: info.ETag}, true, nil
}

// List returns every key under prefix with its etag and LastModified, sorted by key
// (ListObjectsV2). minio-go's iterator pages: it follows the continuation token, one
// request per page of at most 1 000 keys, so a prefix of any size lists completely.
// Objects under the store prefix whose names are not valid keys (console "folder"
// markers, foreign files) are skipped.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if err := store.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("s3 store: list: %w", err)
	}
	var out []store.Entry
	for obj := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("s3 store: list %q: %w", prefix, classify(obj.Err))
		}
		key, ok := strings.CutPrefix(obj.Key, s.prefix)
		if !ok || store.CheckKey(key) != nil {
			continue
		}
		out = append(out, store.Entry{Key: key, ETag: obj.ETag, ModTime: obj.LastModified})
	}
	if err := ctx.Err(); err != nil {
		// The iterator stops quietly on cancellation; a truncated list must not pass
		// for a complete one.
		return nil, fmt.Errorf("s3 store: list %q: %w: %w", prefix, store.ErrUnavailable, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Put writes value at key under cond (one PUT with If-Match or If-None-Match: *).
func (s *Store) Put(ctx context.Context, key string, value []byte, cond store.Condition) (string, error) {
	name, err := s.name(key)
	if err != nil {
		return "", err
	}
	if cond.IfMatch != "" && cond.IfNoneMatch {
		return "", fmt.Errorf("s3 store: put %q: IfMatch and IfNoneMatch are exclusive", key)
	}
	if len(value) > store.MaxObjectSize {
		return "", fmt.Errorf("s3 store: put %q: %w: %d bytes", key, store.ErrTooLarge, len(value))
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
	switch {
	case cond.IfMatch != "":
		opts.SetMatchETag(cond.IfMatch)
	case cond.IfNoneMatch:
		opts.SetMatchETagExcept("*")
	}
	info, err := s.client.PutObject(ctx, s.bucket, name, bytes.NewReader(value), int64(len(value)), opts)
	if err != nil {
		// If-Match on an absent key answers 404 (MinIO, AWS): the condition failed.
		if cond.IfMatch != "" && statusOf(err) == http.StatusNotFound && minio.ToErrorResponse(err).Code != "NoSuchBucket" {
			return "", fmt.Errorf("s3 store: put %q: %w: If-Match, but the key is absent", key, store.ErrPreconditionFailed)
		}
		return "", fmt.Errorf("s3 store: put %q: %w", key, classify(err))
	}
	if info.ETag == "" {
		return "", fmt.Errorf("s3 store: put %q: %w: server returned no ETag", key, store.ErrUnavailable)
	}
	return info.ETag, nil
}

// Delete removes key; with a non-empty ifMatch only if the etag matches. It stats the
// object first (S3 deletes of absent keys succeed silently, and most servers ignore
// If-Match on DELETE): see the package doc for the race this leaves.
func (s *Store) Delete(ctx context.Context, key, ifMatch string) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	info, err := s.client.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return fmt.Errorf("s3 store: delete %q: %w", key, classify(err))
	}
	if ifMatch != "" && info.ETag != ifMatch {
		return fmt.Errorf("s3 store: delete %q: %w: etag moved", key, store.ErrPreconditionFailed)
	}
	if err := s.client.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("s3 store: delete %q: %w", key, classify(err))
	}
	return nil
}

func statusOf(err error) int {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.StatusCode
	}
	return 0
}

// classify maps a client error onto the store's sentinels, keeping the original.
func classify(err error) error {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.StatusCode == http.StatusNotFound && er.Code == "NoSuchBucket":
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		case er.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%w: %w", store.ErrNotFound, err)
		case er.StatusCode == http.StatusPreconditionFailed,
			er.StatusCode == http.StatusConflict && er.Code == "ConditionalRequestConflict":
			return fmt.Errorf("%w: %w", store.ErrPreconditionFailed, err)
		}
	}
	// Everything else: network, timeouts, 5xx, 403, a missing bucket, cancellation.
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}
