package fleetcerts

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/scafo/ingress/internal/nodetest"
)

// TestNothingIsWrittenAfterClose: a goroutine CertMagic started before Close that
// reaches the store only after it (an obtain for a name the last Sync managed) is
// refused its lock and its writes, so the storage holds nothing Close did not see
// (TestNamesThatFailedBeforeDoNotTakeTheBudgetFirst found a lock directory created
// after Close, in its TempDir's cleanup). Reads and unlocks still go through.
func TestNothingIsWrittenAfterClose(t *testing.T) {
	dir := t.TempDir()
	st := &tracked{Storage: &certmagic.FileStorage{Path: dir}}
	ctx := context.Background()
	st.close()
	if err := st.Lock(ctx, "issue_cert_a.example.org"); !errors.Is(err, errClosed) {
		t.Fatalf("Lock after close: %v, want errClosed", err)
	}
	if _, err := st.TryLock(ctx, "issue_cert_a.example.org"); !errors.Is(err, errClosed) {
		t.Fatalf("TryLock after close: %v, want errClosed", err)
	}
	if err := st.Store(ctx, "certificates/a.example.org/a.crt", []byte("x")); !errors.Is(err, errClosed) {
		t.Fatalf("Store after close: %v, want errClosed", err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("the storage after close holds %v (%v)", entries, err)
	}
	if _, err := st.Load(ctx, "certificates/a.example.org/a.crt"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load after close: %v, want not found", err)
	}
	if !st.idle(0) {
		t.Fatal("refused calls left the store busy")
	}
}

// TestCloseWaitsForTheLastLockToBeReleased: idle (what Close waits on) answers false
// while a lock is held and its deadline passes, and true as soon as the lock is
// released, however long its deadline.
func TestCloseWaitsForTheLastLockToBeReleased(t *testing.T) {
	st := &tracked{Storage: &certmagic.FileStorage{Path: t.TempDir()}}
	ctx := context.Background()
	if err := st.Lock(ctx, "issue_cert_a.example.org"); err != nil {
		t.Fatal(err)
	}
	if st.idle(0) {
		t.Fatal("idle with a lock held")
	}
	idle := make(chan bool, 1)
	go func() { idle <- st.idle(time.Hour) }()
	nodetest.WaitFor(t, 10*time.Second, "idle waiting", func() bool { // it looked, and waits for a call to return
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.left != nil
	})
	if err := st.Unlock(ctx, "issue_cert_a.example.org"); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-idle:
		if !ok {
			t.Fatal("idle false after the lock was released")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("idle still waiting after the last lock was released")
	}
}
