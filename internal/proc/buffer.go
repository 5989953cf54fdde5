package proc

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a child process (its Stdout or Stderr) or a logger
// writes while the test reads it: every method holds one lock.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *Buffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String returns what was written so far.
func (w *Buffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
