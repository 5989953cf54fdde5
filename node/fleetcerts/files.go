package fleetcerts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The file delivery mode (Options.CertDir): for a Traefik on the same machine as its
// node, the render names files instead of inlining the PEM, so the rendered body stays
// small (a path per certificate instead of ~2 kB of PEM) and Traefik reads each pair
// from disk (its FileOrContent: a value that is an existing path is read).
//
// A file's name carries the certificate's serial (<name>.<serial>.crt/.key): a renewal
// is a new path, so the rendered body changes and Traefik reloads; an unchanged
// certificate keeps its path, so the body is byte-stable. Files are written once
// (temp file, fsync, rename), mode 0640 in a 0750 directory: Traefik must run as the
// node's user or in its group. Files of certificates in neither the current nor the
// previous set are removed (a Traefik that fetched the previous body still finds its
// files).

// certFiles writes c's files under dir unless they exist and returns their paths.
func certFiles(dir, name string, c *heldCert) (certPath, keyPath string, err error) {
	base := filepath.Join(dir, name+"."+c.serial)
	certPath, keyPath = base+".crt", base+".key"
	for _, f := range []struct{ path, content string }{{certPath, c.certPEM}, {keyPath, c.keyPEM}} {
		if b, err := os.ReadFile(f.path); err == nil && string(b) == f.content {
			continue
		}
		if err := writeAtomic(f.path, []byte(f.content)); err != nil {
			return "", "", fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return certPath, keyPath, nil
}

func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o640); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// pruneCertFiles removes the .crt/.key files of dir that keep does not name.
func pruneCertFiles(dir string, keep map[string]bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !(strings.HasSuffix(n, ".crt") || strings.HasSuffix(n, ".key")) {
			continue
		}
		if p := filepath.Join(dir, n); !keep[p] {
			os.Remove(p)
		}
	}
}
