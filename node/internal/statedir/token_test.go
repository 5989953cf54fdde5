package statedir

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestMintedTokenIsPrivateAndSurvivesRestart: a minted token is 32 random bytes in hex,
// in a file only its owner reads, read back on the next start; a configured one wins.
func TestMintedTokenIsPrivateAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	dirPath := t.TempDir()
	tok, err := LoadOrMintToken("", dirPath, "ingress-token")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 64 {
		t.Fatalf("token %d hex chars, want 64 (32 bytes)", len(tok))
	}
	fi, err := os.Stat(filepath.Join(dirPath, "ingress-token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	again, err := LoadOrMintToken("", dirPath, "ingress-token")
	if err != nil || again != tok {
		t.Fatalf("restart minted a new token (%v)", err)
	}
	if given, _ := LoadOrMintToken("explicit", dirPath, "ingress-token"); given != "explicit" {
		t.Fatal("a configured token does not win over the file")
	}
}

// TestAnEmptyTokenFileIsReplacedNotFatal: an older node on a full disk left an empty
// token file, and every later start failed. Minting now never leaves one (temp file,
// sync, link), and an empty one is replaced; concurrent minters agree on one token.
func TestAnEmptyTokenFileIsReplacedNotFatal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadOrMintToken("", dir, "admin-token")
	if err != nil || len(tok) != 64 {
		t.Fatalf("start over an empty token file: %q %v", tok, err)
	}
	if again, err := LoadOrMintToken("", dir, "admin-token"); err != nil || again != tok {
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
			tk, err := LoadOrMintToken("", fresh, "ingress-token")
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
