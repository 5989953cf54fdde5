package docs

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Slug is the anchor GitHub gives a heading: lowercased, every character that is not a
// letter, a digit, a space, '-' or '_' dropped, spaces turned into '-'.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	headingRE = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	sectionRE = regexp.MustCompile(`^(\d+)\. `)
)

// Anchors are the anchors of a markdown page's headings (a repeated heading gets -1,
// -2, … as on GitHub), and the numbers of its numbered sections ("## 4. Rendering"
// is section 4). Headings inside fenced code blocks do not count.
func Anchors(page string) (anchors map[string]bool, sections map[string]bool) {
	anchors, sections = map[string]bool{}, map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings(page) {
		s := Slug(h)
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
		if m := sectionRE.FindStringSubmatch(h); m != nil {
			sections[m[1]] = true
		}
	}
	return anchors, sections
}

func headings(page string) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if m := headingRE.FindStringSubmatch(l); m != nil && !fenced {
			out = append(out, m[1])
		}
	}
	return out
}

var (
	// A section sign and its number: "§4", "§ 13", "§13.1.1".
	citationRE = regexp.MustCompile(`§ ?(\d+)((?:\.\d+)*)`)
	// An RFC's own sections ("RFC 9110 §13.1.1") are not the design's.
	rfcRE = regexp.MustCompile(`RFC ?\d+,? *(?:section |§ ?)?$`)
	// docs/design.md#anchor.
	designLinkRE = regexp.MustCompile(`design\.md#([A-Za-z0-9_-]+)`)
)

// BadCitations returns a line for every design reference in text that does not resolve
// against docs/design.md's sections and anchors: a "§N" that is not an RFC's must name a
// numbered section, and "design.md#a" an anchor of the page.
func BadCitations(name, text string, anchors, sections map[string]bool) []string {
	var bad []string
	for i, line := range strings.Split(text, "\n") {
		for _, m := range citationRE.FindAllStringSubmatchIndex(line, -1) {
			before := line[:m[0]]
			if rfcRE.MatchString(before) {
				continue
			}
			num := line[m[2]:m[3]]
			if !sections[num] {
				bad = append(bad, fmt.Sprintf("%s:%d: %q cites design section %s, which docs/design.md does not have", name, i+1, strings.TrimSpace(line), num))
			}
		}
		for _, m := range designLinkRE.FindAllStringSubmatch(line, -1) {
			if !anchors[m[1]] {
				bad = append(bad, fmt.Sprintf("%s:%d: %q links docs/design.md#%s, which is no heading there", name, i+1, strings.TrimSpace(line), m[1]))
			}
		}
	}
	return bad
}

// Link is a markdown link's target, split.
type Link struct {
	Line   int
	Path   string // relative to the page; empty for an anchor on the page itself
	Anchor string
}

var linkRE = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// Links returns the relative links of a markdown page (not http:, https:, mailto:),
// outside fenced code blocks.
func Links(page string) []Link {
	var out []Link
	fenced := false
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			t := m[1]
			if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			p, a, _ := strings.Cut(t, "#")
			out = append(out, Link{Line: i + 1, Path: p, Anchor: a})
		}
	}
	return out
}
