package docs

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testName is a Go test, benchmark or fuzz target's name as the docs cite it.
var testName = regexp.MustCompile("\\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]+")

// testFuncs returns the names of every test, benchmark and fuzz function in the
// repository's _test.go files (every module under it; codeFiles' walk).
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)
	out := map[string]bool{}
	for _, p := range codeFiles(t) {
		if !strings.HasSuffix(p, "_test.go") {
			continue
		}
		b := mustRead(t, p)
		for _, m := range decl.FindAllSubmatch(b, -1) {
			out[string(m[1])] = true
		}
	}
	return out
}

// afterRun reports whether text ends inside a go test -run flag's argument (after
// "-run ", "-run '", "-run=", or an alternative of one: "-run 'A|"): what follows is a
// pattern.
func afterRun(text string) bool {
	i := strings.LastIndex(text, "-run")
	if i < 0 {
		return false
	}
	arg := strings.TrimLeft(text[i+len("-run"):], " =")
	arg = strings.TrimLeft(arg, "'\"")
	return !strings.ContainsAny(arg, " \n\t`")
}

// prefixes reports whether pattern begins the name of some test in have.
func prefixes(have map[string]bool, pattern string) bool {
	for n := range have {
		if strings.HasPrefix(n, pattern) {
			return true
		}
	}
	return false
}

// TestEveryTestTheDocsNameExists: a test (benchmark, fuzz target) the docs name as the guard of a behaviour
// (docs/design.md §15 names one per invariant) must exist, so that merging or renaming
// a test (issue 49) cannot leave a page pointing at nothing. A subtest is named as
// Parent/sub: the parent must exist. In a -run argument or before a "*" a name is a
// pattern: some test must begin with it (any package's: the page's command is not
// resolved to its package).
func TestEveryTestTheDocsNameExists(t *testing.T) {
	have := testFuncs(t)
	if len(have) < 500 {
		t.Fatalf("found %d test functions: the walk missed the repository", len(have))
	}
	pages := docPages(t)
	more, err := filepath.Glob(filepath.Join(root, "deploy", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Not e2e/bench/REPORT.md: a generated record whose notes name the report's tests of
	// the day they were run (it was a test package before issue 49; its header says so).
	pages = append(append(pages, more...), filepath.Join(root, "e2e", "README.md"),
		filepath.Join(root, "deploy", "FLEET.md"))
	for _, p := range pages {
		b := mustRead(t, p)
		var missing []string
		for _, at := range testName.FindAllStringIndex(string(b), -1) {
			name := string(b[at[0]:at[1]])
			pattern := afterRun(string(b[:at[0]])) || strings.HasPrefix(string(b[at[1]:]), "*")
			if have[name] || slices.Contains(missing, name) || (pattern && prefixes(have, name)) {
				continue
			}
			missing = append(missing, name)
		}
		for _, name := range missing {
			t.Errorf("%s names %s: no test, benchmark or fuzz target of that name", filepath.Base(p), name)
		}
	}
}
