// Package s3test gives tests a real S3 server: the one named by SCAFO_TEST_S3_* (for
// example started by .ci/minio.sh start), or else a MinIO this package starts from
// <repo>/.bin/minio (installed by .ci/minio.sh install) on a free loopback port with a
// temp data dir, and kills by PID when the test binary ends.
//
//	func TestMain(m *testing.M) { s3test.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		cfg := s3test.Shared(t).NewBucket(t) // own bucket, removed afterwards
//		st, err := s3.New(t.Context(), cfg)
//		…
//	}
//
// With no server and no binary the test is skipped with instructions, except under CI
// (env CI set), where it fails: CI must install MinIO.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/node/store/s3"
)

// Environment variables naming an external S3 server.
const (
	EnvEndpoint  = "SCAFO_TEST_S3_ENDPOINT" // host:port, or http(s)://host:port
	EnvAccessKey = "SCAFO_TEST_S3_ACCESS_KEY"
	EnvSecretKey = "SCAFO_TEST_S3_SECRET_KEY"
	EnvRegion    = "SCAFO_TEST_S3_REGION" // optional, default us-east-1
	// EnvMinIOBin overrides where the minio binary is looked for.
	EnvMinIOBin = "SCAFO_TEST_MINIO_BIN"
)

const region = "us-east-1"

// Server is a reachable S3 endpoint.
type Server struct {
	Endpoint  string // host:port or URL, as s3.Config.Endpoint takes it
	AccessKey string
	SecretKey string
	Region    string

	// Set when this package runs the server.
	dataDir string
	proc    *proc.Proc
}

var (
	mainActive bool
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error

	ownedMu sync.Mutex
	owned   []*Server // servers to kill at exit
)

// Main runs the package's tests and then stops every MinIO this package started. Call
// it from TestMain.
func Main(m *testing.M) {
	mainActive = true
	code := m.Run()
	ownedMu.Lock()
	for _, s := range owned {
		s.remove(code != 0)
	}
	ownedMu.Unlock()
	os.Exit(code)
}

// TB is what Start and NewBucket use of a test: *testing.T is one, and so is a program's own
// harness (e2e/bench's task), which cannot be a testing.TB.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Name() string
}

// Unavailable skips the test (or, under CI, fails it) because no S3 server can be had.
func unavailable(t TB, why error) {
	t.Helper()
	msg := fmt.Sprintf("no S3 server for tests: %v. Run `.ci/minio.sh install` (MinIO into <repo>/.bin, 4–7 minutes cold), or set %s, %s and %s",
		why, EnvEndpoint, EnvAccessKey, EnvSecretKey)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Shared returns the server every test of the binary uses: the external one from the
// environment, or a MinIO started on first use.
func Shared(t testing.TB) *Server {
	t.Helper()
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		s := &Server{Endpoint: ep, AccessKey: os.Getenv(EnvAccessKey), SecretKey: os.Getenv(EnvSecretKey), Region: os.Getenv(EnvRegion)}
		if s.Region == "" {
			s.Region = region
		}
		return s
	}
	if !mainActive {
		t.Fatal("s3test: call s3test.Main(m) from TestMain so the MinIO it starts is stopped")
	}
	sharedOnce.Do(func() {
		bin, err := MinIOBinary()
		if err != nil {
			sharedErr = err
			return
		}
		shared, sharedErr = start(bin)
	})
	if sharedErr != nil {
		if errors.Is(sharedErr, errNoBinary) {
			unavailable(t, sharedErr)
		}
		t.Fatalf("starting MinIO: %v", sharedErr)
	}
	return shared
}

// Start runs a MinIO that belongs to the calling test alone (for fault tests that stop
// and restart it), killed at the test's end.
func Start(t TB) *Server {
	t.Helper()
	bin, err := MinIOBinary()
	if err != nil {
		unavailable(t, err)
	}
	s, err := start(bin)
	if err != nil {
		t.Fatalf("starting MinIO: %v", err)
	}
	t.Cleanup(func() {
		s.remove(t.Failed())
		if t.Failed() {
			t.Logf("minio log kept: %s", s.proc.Log)
		}
	})
	return s
}

// remove kills the server and deletes its data, and its log unless keepLog.
func (s *Server) remove(keepLog bool) {
	s.kill()
	os.RemoveAll(s.dataDir)
	if !keepLog {
		os.Remove(s.proc.Log)
	}
}

var errNoBinary = errors.New("minio binary not found")

// MinIOBinary finds the minio binary: $SCAFO_TEST_MINIO_BIN, <repo>/.bin/minio (the
// repo being the nearest parent directory holding go.mod), or minio on PATH.
func MinIOBinary() (string, error) {
	if p := os.Getenv(EnvMinIOBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", errNoBinary, EnvMinIOBin, p, err)
		}
		return p, nil
	}
	var looked []string
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				p := filepath.Join(d, ".bin", "minio")
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
				looked = append(looked, p)
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	looked = append(looked, "$PATH")
	return "", fmt.Errorf("%w (looked in %s)", errNoBinary, strings.Join(looked, ", "))
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func start(bin string) (*Server, error) {
	dataDir, err := os.MkdirTemp("", "scafo-minio-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		AccessKey: "scafo-test",
		SecretKey: randHex(16),
		Region:    region,
		dataDir:   dataDir,
	}
	s.proc = &proc.Proc{
		Name: "minio",
		Bin:  bin,
		Env: append(os.Environ(),
			"MINIO_ROOT_USER="+s.AccessKey,
			"MINIO_ROOT_PASSWORD="+s.SecretKey,
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
		),
		Log: dataDir + ".log",
	}
	ownedMu.Lock()
	owned = append(owned, s)
	ownedMu.Unlock()
	var lastErr error
	for range 3 { // a free port can be taken between probe and bind: try another
		port, err := proc.FreePort("127.0.0.1")
		if err != nil {
			return nil, err
		}
		s.Endpoint = proc.HostPort("127.0.0.1", port)
		if lastErr = s.run(); lastErr == nil {
			return s, nil
		}
		s.kill()
	}
	os.RemoveAll(dataDir)
	return nil, fmt.Errorf("%w (log kept: %s)", lastErr, s.proc.Log)
}

// readyLimit bounds a MinIO start, up to its first answered S3 call.
const readyLimit = 60 * time.Second

// run starts the process on s.Endpoint with s.dataDir and waits until it answers S3
// calls.
func (s *Server) run() error {
	consolePort, err := proc.FreePort("127.0.0.1")
	if err != nil {
		return err
	}
	s.proc.Args = []string{"server", "--quiet",
		"--address", s.Endpoint,
		"--console-address", proc.HostPort("127.0.0.1", consolePort),
		s.dataDir}
	if err := s.proc.Start(); err != nil {
		return err
	}
	if err := s.waitReady(readyLimit); err != nil {
		if !proc.IsExited(err) { // an exit's error carries the log's tail already
			err = fmt.Errorf("%w\nminio log (%s):\n%s", err, s.proc.Log, s.proc.Tail(40))
		}
		return err
	}
	return nil
}

// waitReady waits until the liveness endpoint answers, then a ListBuckets call, then
// until an unknown access key is refused as unknown: MinIO answers its root credentials
// before its IAM sub-system is up, and any other key with "IAM sub-system not
// initialized yet" (503) until it is (a test of refused credentials failed on that).
func (s *Server) waitReady(limit time.Duration) error {
	client, err := s.Client()
	if err != nil {
		return err
	}
	unknown, err := s.clientAs("scafo-s3test-unknown", "scafo-s3test-unknown-secret")
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: time.Second}
	live := false
	err = s.proc.WaitUntil(limit, func() error {
		if !live {
			if err := proc.HTTPOK(hc, "http://"+s.Endpoint+"/minio/health/live"); err != nil {
				return err
			}
			live = true
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := client.ListBuckets(ctx); err != nil {
			return err
		}
		_, err := unknown.ListBuckets(ctx)
		if code := minio.ToErrorResponse(err).Code; code != "InvalidAccessKeyId" {
			return fmt.Errorf("an unknown access key answered %v (code %q), want InvalidAccessKeyId", err, code)
		}
		return nil
	})
	if err != nil && !proc.IsExited(err) {
		return fmt.Errorf("minio on %s not ready after %v: %w", s.Endpoint, limit, err)
	}
	return err
}

// Stop kills the server (SIGKILL, like a crash or a pulled cable) and waits for it to
// exit. Its data stays for Restart.
func (s *Server) Stop() error {
	if s.proc == nil {
		return errors.New("s3test: server is not run by this package")
	}
	s.kill()
	return nil
}

// Restart starts a stopped server again on the same address with the same data.
func (s *Server) Restart() error {
	if s.proc == nil {
		return errors.New("s3test: server is not run by this package")
	}
	if !s.proc.Exited() {
		return errors.New("s3test: server is still running")
	}
	var err error
	for range 3 {
		// The address is free again once the killed process's socket is gone; another
		// process may still take it before MinIO binds, hence the retries.
		if err = proc.WaitBindable(10*time.Second, s.Endpoint); err != nil {
			return fmt.Errorf("s3test: %s not free again after the stop: %w", s.Endpoint, err)
		}
		if err = s.run(); err == nil {
			return nil
		}
		s.kill()
	}
	return err
}

// PID is the server process's id (0 for an external server, or a stopped one).
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// kill SIGKILLs the server by its PID and waits for it (nothing for an external one).
func (s *Server) kill() {
	if s.proc != nil {
		s.proc.Kill()
	}
}

// Client returns a minio-go client with the server's root credentials.
func (s *Server) Client() (*minio.Client, error) { return s.clientAs(s.AccessKey, s.SecretKey) }

// clientAs is Client with other credentials.
func (s *Server) clientAs(accessKey, secretKey string) (*minio.Client, error) {
	ep, secure := s.Endpoint, false
	if after, ok := strings.CutPrefix(ep, "https://"); ok {
		ep, secure = after, true
	} else if after, ok := strings.CutPrefix(ep, "http://"); ok {
		ep = after
	}
	return minio.New(ep, &minio.Options{
		Creds:      credentials.NewStaticV4(accessKey, secretKey, ""),
		Secure:     secure,
		Region:     s.Region,
		MaxRetries: 1,
	})
}

// Config returns a store config for bucket on this server.
func (s *Server) Config(bucket string) s3.Config {
	return s3.Config{
		Endpoint:        s.Endpoint,
		Bucket:          bucket,
		Region:          s.Region,
		AccessKeyID:     s.AccessKey,
		SecretAccessKey: s.SecretKey,
		Insecure:        !strings.HasPrefix(s.Endpoint, "https://"),
	}
}

// NewBucket creates a bucket named after the test (plus random hex), removes it and its
// objects when the test ends, and returns a store config for it.
func (s *Server) NewBucket(t TB) s3.Config {
	t.Helper()
	name := BucketName(t.Name())
	client, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("creating bucket %s on %s: %v", name, s.Endpoint, err)
	}
	t.Cleanup(func() {
		if s.proc != nil && s.proc.Exited() { // a stopped dedicated server: its data dir goes anyway
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.RemoveBucketWithOptions(ctx, name, minio.RemoveBucketOptions{ForceDelete: true}); err != nil {
			t.Logf("removing test bucket %s: %v", name, err)
		}
	})
	return s.Config(name)
}

// BucketName turns a test name into a valid, unique bucket name.
func BucketName(testName string) string {
	var b strings.Builder
	b.WriteString("t-")
	dash := false
	for _, r := range strings.ToLower(testName) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.TrimRight(b.String(), "-")
	if len(base) > 45 {
		base = strings.TrimRight(base[:45], "-")
	}
	return base + "-" + randHex(8)
}
