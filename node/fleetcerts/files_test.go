package fleetcerts

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCertFilesAreWrittenOnceNamedBySerialAndPruned: the file delivery writes a pair
// per (name, serial), 0640, reuses it unchanged, and prune removes exactly the files
// that no kept set names.
func TestCertFilesAreWrittenOnceNamedBySerialAndPruned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	c1 := &heldCert{serial: "0a1b", certPEM: "CERT-1\n", keyPEM: "KEY-1\n"}
	crt, key, err := certFiles(dir, "shop.example.org", c1)
	if err != nil {
		t.Fatal(err)
	}
	if crt != filepath.Join(dir, "shop.example.org.0a1b.crt") || key != filepath.Join(dir, "shop.example.org.0a1b.key") {
		t.Fatalf("paths %s %s", crt, key)
	}
	for path, want := range map[string]string{crt: "CERT-1\n", key: "KEY-1\n"} {
		b, err := os.ReadFile(path)
		if err != nil || string(b) != want {
			t.Fatalf("%s: %q %v", path, b, err)
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o640 {
			t.Fatalf("%s mode %v, want 0640", path, fi.Mode().Perm())
		}
	}
	st1, _ := os.Stat(key)
	if _, _, err := certFiles(dir, "shop.example.org", c1); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(key); !st2.ModTime().Equal(st1.ModTime()) {
		t.Fatal("an unchanged certificate's file was rewritten")
	}
	c2 := &heldCert{serial: "0c2d", certPEM: "CERT-2\n", keyPEM: "KEY-2\n"}
	crt2, key2, err := certFiles(dir, "shop.example.org", c2)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)
	pruneCertFiles(dir, map[string]bool{crt2: true, key2: true})
	left, _ := os.ReadDir(dir)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if len(names) != 3 || names[0] != "notes.txt" || names[1] != "shop.example.org.0c2d.crt" || names[2] != "shop.example.org.0c2d.key" {
		t.Fatalf("after prune: %v", names)
	}
}
