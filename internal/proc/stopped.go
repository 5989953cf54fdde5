package proc

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// WaitStopped waits (up to 30 s) until the process pid is stopped: SIGSTOP, state T in
// /proc/pid/stat (Linux). The tests that freeze a server to queue connections on its
// socket use it.
func WaitStopped(t TB, pid int) {
	t.Helper()
	if Poll(30*time.Second, time.Millisecond, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i:]), ") T") {
			return nil
		}
		return errors.New("not stopped")
	}) != nil {
		t.Fatalf("process %d not stopped 30 s after SIGSTOP", pid)
	}
}
