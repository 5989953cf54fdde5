package httpapi_test

import (
	"testing"

	"github.com/scafo/ingress/node/store/s3/s3test"
)

// TestMain stops the MinIO the tests on both backends (testnode.OnBackends) started.
func TestMain(m *testing.M) { s3test.Main(m) }
