package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionsUpgradeInCommitOrder: version.sh gives every state of a checkout a Debian
// version that dpkg sorts after the one before it (no tag, commits, a tag, commits after
// it, uncommitted changes), so a package built later upgrades one built earlier.
func TestVersionsUpgradeInCommitOrder(t *testing.T) {
	for _, tool := range []string{"git", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not found", tool)
			}
			t.Skipf("%s not found", tool)
		}
	}
	repo := t.TempDir()
	script, err := os.ReadFile("version.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "deploy", "package"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "deploy", "package", "version.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	version := func() string {
		t.Helper()
		out, err := exec.Command(filepath.Join(repo, "deploy", "package", "version.sh")).Output()
		if err != nil {
			t.Fatalf("version.sh: %v", err)
		}
		v := strings.TrimSpace(string(out))
		if !debVersion.MatchString(v) {
			t.Fatalf("version.sh printed %q: not a Debian version", v)
		}
		return v
	}
	commit := func() { git("commit", "-q", "--allow-empty", "-m", "c") }
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	var seen []string
	for _, step := range []struct {
		name   string
		do     func()
		prefix string
	}{
		{"first commit", func() {}, "0.0.0+1.g"},
		{"second commit", commit, "0.0.0+2.g"},
		{"uncommitted change", func() {
			os.WriteFile(filepath.Join(repo, "deploy", "package", "version.sh"), append(script, '\n'), 0o755)
		}, "0.0.0+2.g"},
		{"tag v1.2.3", func() { git("commit", "-q", "-am", "c"); git("tag", "v1.2.3") }, "1.2.3"},
		{"a commit after it", commit, "1.2.3+1.g"},
		{"ten commits after it", func() {
			for i := 0; i < 9; i++ {
				commit()
			}
		}, "1.2.3+10.g"},
		{"tag v1.10.0", func() { git("tag", "v1.10.0") }, "1.10.0"},
	} {
		step.do()
		v := version()
		if !strings.HasPrefix(v, step.prefix) {
			t.Fatalf("%s: %q, want %s…", step.name, v, step.prefix)
		}
		if len(seen) > 0 {
			prev := seen[len(seen)-1]
			if err := exec.Command("dpkg", "--compare-versions", v, "gt", prev).Run(); err != nil {
				t.Fatalf("%s: %s does not upgrade %s (dpkg --compare-versions)", step.name, v, prev)
			}
		}
		seen = append(seen, v)
	}
	if !strings.HasSuffix(seen[2], ".dirty") {
		t.Fatalf("uncommitted change: %q, want a .dirty suffix", seen[2])
	}
	t.Log(strings.Join(seen, " < "))
}
