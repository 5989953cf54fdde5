package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child started through this package dies with the process that started it, even
// when that process is SIGKILLed and runs no cleanup (Pdeathsig).
func TestChildDiesWithItsParent(t *testing.T) {
	p := child(t, "parent", "PROC_TEST_LOG="+filepath.Join(t.TempDir(), "grandchild.log"))
	p.MustStart(t)
	must(t, p.WaitLog(10*time.Second, 0, "grandchild pid"))
	m := regexp.MustCompile(`grandchild pid (\d+)`).FindStringSubmatch(p.Output())
	pid, _ := strconv.Atoi(m[1])
	t.Cleanup(func() {
		if alive(pid) { // the test failed: do not leave the grandchild behind
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !alive(pid) {
		t.Fatalf("grandchild %d is not running before its parent is killed", pid)
	}
	p.Kill()
	WaitFor(t, "the grandchild to die", 10*time.Second, func() error {
		if alive(pid) {
			return fmt.Errorf("grandchild %d still running", pid)
		}
		return nil
	})
}

// alive reports whether pid is a process that is neither gone nor a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
