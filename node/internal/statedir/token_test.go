package statedir

import (
	"os"
	"path/filepath"
	"strings"
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
	path, tok, err := loadTokenFile(t, "admin-token", "")
	dir := filepath.Dir(path)
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

// TestATokenFileIsRefusedUnlessItHoldsAToken: a token file whose token holds a control
// character (a NUL, a CR inside, a DEL, a C1) is refused naming the file, never used: no
// HTTP header carries it, so no client could present it. So is one too short to be a
// token (a one-character file was the token) or longer than a token may be (refused,
// not cut). The newline an editor leaves at the end is trimmed, not refused.
func TestATokenFileIsRefusedUnlessItHoldsAToken(t *testing.T) {
	t.Parallel()
	refusals := map[string]string{"a\n": "at least 16", strings.Repeat("a", 5000): "more than 4096 bytes"} // content: what the refusal says
	for _, c := range []string{"0123456789abcdef\x000123", "0123456789abcdef\r0123", "0123456789abcdef\t0123",
		"0123456789abcdef\x7f0123", "0123456789abcdef\u00850123", "0123456789\nabcdef0123"} {
		refusals[c+"\n"] = "control character"
	}
	for content, want := range refusals {
		path, tok, err := loadTokenFile(t, "ingress-token", content)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("token file %.40q: %.40q, %v; want refused naming the file and %q", content, tok, err, want)
		}
	}
	if _, tok, err := loadTokenFile(t, "admin-token", "0123456789abcdef0123\r\n"); err != nil || tok != "0123456789abcdef0123" {
		t.Errorf("a token ending in CRLF: %q, %v; want the token, trimmed", tok, err)
	}
}

// loadTokenFile writes content as the token file name of a new state dir and loads it.
func loadTokenFile(t *testing.T, name, content string) (path, tok string, err error) {
	t.Helper()
	path = filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err = LoadOrMintToken("", filepath.Dir(path), name)
	return path, tok, err
}
