package client

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/scafo/ingress/internal/safetext"
)

// What the CLI prints as text (not --json) comes from the fleet's store, which a node,
// a holder of the store's credentials or a bad restore may have filled with anything.
// A terminal acts on what it is sent: an escape sequence rewrites the screen, sets the
// window title or the clipboard, a bidirectional control reorders a line, a newline or
// a tab forges a row or a column of a table. So every value printed as text goes
// through escape, and every table through cleanText (hostile review 1, finding 3).

// escape shows every control character, line or paragraph separator and bidirectional
// control of s as its Go escape (\x1b, \n, \u202e): printed, it is one cell's text.
func escape(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			b.WriteString(runeEscape(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cleanText is escape for a whole table or message: its own tabs and newlines (the
// layout) stay, every other unsafe character is escaped. A value with a tab or a
// newline of its own must go through escape first.
func cleanText(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && r != '\n' && unsafeRune(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r != '\t' && r != '\n' && unsafeRune(r) {
			b.WriteString(runeEscape(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unsafeRune is safetext.Unsafe, and U+FFFD: what a byte that is not UTF-8 decodes to,
// shown as its escape so that a reader sees something was there.
func unsafeRune(r rune) bool { return safetext.Unsafe(r) || r == unicode.ReplacementChar }

func runeEscape(r rune) string {
	switch {
	case r == '\n':
		return `\n`
	case r == '\t':
		return `\t`
	case r == '\r':
		return `\r`
	case r < 0x100:
		return fmt.Sprintf(`\x%02x`, r)
	default:
		return fmt.Sprintf(`\u%04x`, r)
	}
}
