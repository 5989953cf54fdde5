// Package walkthrough matches what a documented shell session printed against the
// output the page shows for it: the README's walkthrough test and docs/install.md's
// (under systemd) read expected output the same way.
package walkthrough

import (
	"regexp"
	"strings"
)

// placeholder is "<word>" in an expected line: one run of non-space characters.
var placeholder = regexp.MustCompile(`<[a-z][a-z-]*>`)

// Match matches got against want line by line: "…" is any run of characters, and a
// line that is only "…" any number of lines; "<word>" is one run of non-space
// characters. Trailing blank lines, trailing white space and carriage returns (curl -i
// prints the status line with its CR) do not count.
func Match(want, got string) bool {
	var pat strings.Builder
	pat.WriteString(`\A`)
	for _, l := range strings.Split(strings.TrimRight(want, "\n"), "\n") {
		if strings.TrimSpace(l) == "…" {
			pat.WriteString(`(?:.*\n)*?`)
			continue
		}
		last := 0
		for _, m := range placeholder.FindAllStringIndex(l, -1) {
			pat.WriteString(quoteEllipsis(l[last:m[0]]))
			pat.WriteString(`\S+?`)
			last = m[1]
		}
		pat.WriteString(quoteEllipsis(l[last:]) + `\n`)
	}
	pat.WriteString(`\s*\z`)
	got = strings.ReplaceAll(got, "\r", "")
	return regexp.MustCompile(pat.String()).MatchString(strings.TrimRight(got, "\n") + "\n")
}

// quoteEllipsis quotes s for a regular expression, "…" standing for any run.
func quoteEllipsis(s string) string {
	parts := strings.Split(s, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return strings.Join(parts, `.*?`)
}
