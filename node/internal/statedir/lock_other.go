//go:build !unix

package statedir

// LockFile is the lock's name in the state dir.
const LockFile = "lock"

// Lock is a held state dir. Without flock (not a unix), nothing is held: two nodes on
// one state dir are not refused on this platform.
type Lock struct{}

// Acquire takes dir's lock: here, nothing.
func Acquire(string) (*Lock, error) { return &Lock{}, nil }

// Release lets the state dir go.
func (*Lock) Release() error { return nil }
