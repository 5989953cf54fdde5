//go:build unix

package fdlimit

import "syscall"

// Limit is the process's soft limit on open files (0 when unknown). The Go runtime
// raises it to the hard limit at start on Linux and the BSDs.
func Limit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
