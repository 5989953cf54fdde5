package node_test

// The package's S3 tests (storecheck_s3_test.go) run against a real MinIO (package
// s3test); without one they are skipped outside CI and fail in CI. The fleet behaviours
// that ran here on MinIO run on the dir store in process (fleet_s3moved_test.go); that
// the backends are equal is storetest's, run on dir and on MinIO.

import (
	"flag"
	"testing"

	"github.com/scafo/ingress/node/store/s3/s3test"
)

// TestMain stops the MinIO that s3test starts for this package's tests. Unless
// -test.parallel says otherwise, it runs four of the tests marked parallel at a time,
// not GOMAXPROCS: the whole-node tests spend most of their time waiting on their
// nodes. The tests that bound wall-clock time are not marked: they run first, alone.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", "4")
	}
	s3test.Main(m)
}
