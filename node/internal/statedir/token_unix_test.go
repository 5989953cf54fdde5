//go:build unix

package statedir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestATokenFileMustNameARegularFileOfAToken: a symlink to nothing at the token's path
// (a secrets mount not there yet) made every start mint and link for ever, ignoring
// SIGTERM and leaving a temporary file per attempt; a fifo there blocked the start. Each
// is refused now, naming the file, and nothing is left behind; a symlink to a regular
// file holding a token is read through.
func TestATokenFileMustNameARegularFileOfAToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "admin-token")
	if err := os.Symlink(filepath.Join(dir, "not-mounted", "x"), path); err != nil {
		t.Fatal(err)
	}
	if tok, err := LoadOrMintToken("", dir, "admin-token"); err == nil || !strings.Contains(err.Error(), "symlink to nothing") || !strings.Contains(err.Error(), path) {
		t.Errorf("a symlink to nothing: %q, %v; want refused naming %s", tok, err, path)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the state dir holds %d entries after the refusal, want the symlink alone", len(ents))
	}

	fifo := filepath.Join(t.TempDir(), "ingress-token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrMintToken("", filepath.Dir(fifo), "ingress-token"); err == nil || !strings.Contains(err.Error(), "want a regular file") {
		t.Errorf("a fifo: %v, want refused as not a regular file", err)
	}

	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	linked := t.TempDir()
	if err := os.Symlink(secret, filepath.Join(linked, "admin-token")); err != nil {
		t.Fatal(err)
	}
	if tok, err := LoadOrMintToken("", linked, "admin-token"); err != nil || tok != "0123456789abcdef0123" {
		t.Errorf("a symlink to the token: %q, %v", tok, err)
	}
}
