package node_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/scafo/ingress/node"
)

// TestAnEmptyTokenFileIsReplacedNotFatal: an older node on a full disk left an empty
// token file, and every later start failed. Minting now never leaves one (temp file,
// sync, link), and an empty one is replaced; concurrent minters agree on one token.
func TestAnEmptyTokenFileIsReplacedNotFatal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := node.LoadOrMintToken("", dir, "admin-token")
	if err != nil || len(tok) != 64 {
		t.Fatalf("start over an empty token file: %q %v", tok, err)
	}
	if again, err := node.LoadOrMintToken("", dir, "admin-token"); err != nil || again != tok {
		t.Fatalf("restart: %q %v, want %q", again, err, tok)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("state dir holds %d entries, want only the token file (no temp files left)", len(ents))
	}
	fresh := t.TempDir()
	toks := make(chan string, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := node.LoadOrMintToken("", fresh, "ingress-token")
			if err != nil {
				t.Error(err)
			}
			toks <- tk
		}()
	}
	wg.Wait()
	close(toks)
	first := <-toks
	for tk := range toks {
		if tk != first {
			t.Fatal("concurrent minters disagree on the token")
		}
	}
}
