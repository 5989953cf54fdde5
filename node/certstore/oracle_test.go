package certstore

import (
	"testing"

	"github.com/scafo/ingress/node/certstore/certstoretest"
)

// TestMatchesFileStorage runs the CertMagic storage suite's oracle on this Storage
// (certstoretest.MatchesFileStorage: every answer compared with FileStorage's).
func TestMatchesFileStorage(t *testing.T) {
	st, _ := dirStore(t)
	ops := 400
	if testing.Short() {
		ops = 120
	}
	ours := New(st, quietOpts(Options{}))
	certstoretest.MatchesFileStorage(t, ours, ours, certstoretest.Oracle{Seed1: 14, Seed2: 1, Ops: ops,
		Segs:     []string{"a", "b", "a.b", "ab", "*", "x@y:z", "%2F", "ü", "c d", "~!"},
		RootList: true})
}
