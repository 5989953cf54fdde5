// Package safetext says which characters of a fleet string must never reach a reader as
// they are: a terminal acts on them (an escape sequence, a newline forging a row) and a
// bidirectional control reorders what is shown. The status page's script has the same
// list for the bidirectional controls (node/httpapi/ui/app.js, BIDI).
package safetext

import "unicode"

// Unsafe reports whether r is a control character (C0, DEL, C1), a line or paragraph
// separator (U+2028, U+2029), or a bidirectional control: the embeddings and overrides
// U+202A..U+202E, the isolates U+2066..U+2069, the marks U+200E, U+200F and U+061C.
func Unsafe(r rune) bool {
	switch {
	case unicode.IsControl(r), r == '\u2028', r == '\u2029', r == '\u061c', r == '\u200e', r == '\u200f',
		r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}
