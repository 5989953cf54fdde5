// Package app holds the recipe for running an application's releases on a node
// (app@.service, app@.socket, deploy.sh); this test holds the units to the rules of
// docs/security.md, "Deploy recipes".
package app

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// serviceSettings reads the [Service] section of a unit: each key's values, in order.
func serviceSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && section == "[Service]" {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestTheAppReleaseUnitRunsUnprivilegedAndReadsNoSecret: the template unit an operator
// copies per application runs the tenant's code. As root (the unit had no User= nor
// DynamicUser=) it read the ingress token (every fleet private key through
// /v1/storage), the admin token and the certificates on disk.
func TestTheAppReleaseUnitRunsUnprivilegedAndReadsNoSecret(t *testing.T) {
	s := serviceSettings(t, "app@.service")
	last := func(k string) string {
		if v := s[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	if last("DynamicUser") != "yes" && (last("User") == "" || last("User") == "root" || last("User") == "0") {
		t.Errorf("app@.service runs its release as root (User=%q, DynamicUser=%q): want DynamicUser=yes or an unprivileged User=", last("User"), last("DynamicUser"))
	}
	if last("User") == "root" || last("User") == "0" {
		t.Errorf("app@.service: User=%s", last("User"))
	}
	// ProtectProc=invisible: no other user's process (another tenant's release, its
	// command line) in the release's /proc.
	for k, want := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "CapabilityBoundingSet": "", "ProtectProc": "invisible"} {
		if _, ok := s[k]; !ok || last(k) != want {
			t.Errorf("app@.service: %s=%q (set %v), want %q", k, last(k), ok, want)
		}
	}
	hidden := strings.Fields(strings.Join(s["InaccessiblePaths"], " "))
	for _, p := range []string{"/etc/scafo", "/var/lib/scafo", "/var/lib/private/scafo", "/run/traefik"} {
		if !slices.ContainsFunc(hidden, func(h string) bool { return strings.TrimPrefix(h, "-") == p }) {
			t.Errorf("app@.service: InaccessiblePaths %v lacks %s (the node's and the ingress's secrets)", hidden, p)
		}
	}
}

// TestRecipesWriteSecretFilesPrivately: a recipe line that writes a file under
// /etc/scafo (where the tokens live) does it under umask 077; with the default umask
// (022) the file is world-readable, and any process of the machine reads the tokens.
func TestRecipesWriteSecretFilesPrivately(t *testing.T) {
	write := regexp.MustCompile(`>\s*/etc/scafo/\S+`)
	var files []string
	for _, glob := range []string{"../*/*.service", "../*/*.sh", "../*/README.md", "../../docs/*.md", "../../README.md"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if write.MatchString(line) && !strings.Contains(line, "umask 077") {
				t.Errorf("%s:%d writes a file under /etc/scafo without umask 077: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
