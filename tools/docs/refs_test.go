package docs

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const root = "../.."

// codeFiles are the files whose comments may cite the design: Go sources and tests,
// scripts and configuration, outside .git and the build caches.
func codeFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".bin", "node_modules", "testdata", "results":
				return filepath.SkipDir
			}
			if filepath.ToSlash(p) == root+"/tools/docs" { // the checker's own examples
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".sh", ".yml", ".yaml", ".toml", ".service":
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mustRead is the file at path; an unreadable one fails the test.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// docPages are docs/*.md and README.md.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) < 5 {
		t.Fatalf("found %d pages in docs/ (%v): the glob missed them", len(pages), err)
	}
	return append(pages, filepath.Join(root, "README.md"))
}

func designAnchors(t *testing.T) (anchors, sections map[string]bool) {
	t.Helper()
	b := mustRead(t, filepath.Join(root, "docs", "design.md"))
	anchors, sections = Anchors(string(b))
	if len(sections) < 10 {
		t.Fatalf("docs/design.md has %d numbered sections: its headings are not \"## N. Title\"", len(sections))
	}
	return anchors, sections
}

// Code comments cite the design as "docs/design.md §N" (or, until the node's root
// package is rewritten, "DESIGN §N") and "docs/design.md#anchor": each must name a
// section or a heading that docs/design.md has, so a reader can open it. An RFC's
// sections ("RFC 9110 §13.1.1") are left alone.
func TestEveryDesignCitationInTheCodeResolves(t *testing.T) {
	anchors, sections := designAnchors(t)
	files := codeFiles(t)
	if len(files) < 100 {
		t.Fatalf("found %d code files under %s: the walk is broken", len(files), root)
	}
	cited := 0
	for _, p := range files {
		b := mustRead(t, p)
		if !strings.Contains(string(b), "§") && !strings.Contains(string(b), "design.md#") {
			continue
		}
		cited++
		rel, _ := filepath.Rel(root, p)
		for _, bad := range BadCitations(rel, string(b), anchors, sections) {
			t.Error(bad)
		}
	}
	if cited == 0 {
		t.Fatal("no file cites the design: the scan is broken")
	}
}

// The checker itself: a citation of a section or an anchor that does not exist is
// reported, an RFC's section is not, and one line may hold several citations.
func TestBadCitationsFindsWhatDoesNotResolve(t *testing.T) {
	anchors, sections := Anchors("# Design\n## 3. How\n### The flip invariant\n## 4. Render\n")
	for _, c := range []struct {
		line string
		bad  int
	}{
		{"// see DESIGN §3", 0},
		{"// see docs/design.md §4, and docs/design.md#the-flip-invariant", 0},
		{"// discard the pass (DESIGN §3/§4).", 0},
		{"// RFC 9110 §13.1.1 and RFC 8555 §8.3", 0},
		{"// DESIGN §13", 1},
		{"// docs/design.md §3/§99", 1},
		{"// docs/design.md#the-flip", 1},
		{"// DESIGN §9, docs/design.md#nope", 2},
	} {
		if got := BadCitations("x.go", c.line, anchors, sections); len(got) != c.bad {
			t.Errorf("%q: %d bad citations %q, want %d", c.line, len(got), got, c.bad)
		}
	}
}

// Every relative link of README.md and docs/*.md names a file that exists, and an
// anchor in a markdown page (or on the page itself) names one of its headings.
func TestEveryDocumentationLinkResolves(t *testing.T) {
	anchors := map[string]map[string]bool{} // of each page linked to, read once
	for _, page := range docPages(t) {
		b := mustRead(t, page)
		rel, _ := filepath.Rel(root, page)
		for _, l := range Links(string(b)) {
			target := page
			if l.Path != "" {
				target = filepath.Join(filepath.Dir(page), l.Path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", rel, l.Line, l.Path)
					continue
				}
			}
			if l.Anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if anchors[target] == nil {
				anchors[target], _ = Anchors(string(mustRead(t, target)))
			}
			if !anchors[target][l.Anchor] {
				t.Errorf("%s:%d: link to %s#%s: no such heading (have %v)", rel, l.Line, l.Path, l.Anchor, slices.Sorted(maps.Keys(anchors[target])))
			}
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"4. Rendering for Traefik":                                 "4-rendering-for-traefik",
		"The platform apex's certificate":                          "the-platform-apexs-certificate",
		"`--acme.delivery=files`":                                  "--acmedeliveryfiles",
		"Certificate storage (ingress token only): `/v1/storage`":  "certificate-storage-ingress-token-only-v1storage",
		"Which provider: the HTTP provider or the plugin":          "which-provider-the-http-provider-or-the-plugin",
		"What the store costs, by fleet size":                      "what-the-store-costs-by-fleet-size",
		"Write (admin token, or an application token where noted)": "write-admin-token-or-an-application-token-where-noted",
		"Fleet certificates (`--acme.enabled`)":                    "fleet-certificates---acmeenabled",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}
