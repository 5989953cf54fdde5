package client

import (
	"strings"
	"testing"
)

// TestWhatTheCLIPrintsNeverDrivesTheTerminal (hostile review 1, finding 3): a planted
// store value printed as text (an audit record, an application's health path) cannot
// set the window title, move the cursor, write the clipboard, reorder a line, or forge a
// row or a column: every control, separator and bidirectional control is shown as its
// escape, in a value and in a whole table (whose own tabs and newlines stay its layout).
func TestWhatTheCLIPrintsNeverDrivesTheTerminal(t *testing.T) {
	planted := "shop\x1b]0;pwned\x07\x1b[1A\x1b[2K\x1b]52;c;ZXZpbA==\x07\nadmin\tforged\u202eevil\u2028\u009b\x00\r"
	got := escape(planted)
	want := `shop\x1b]0;pwned\x07\x1b[1A\x1b[2K\x1b]52;c;ZXZpbA==\x07\nadmin\tforged\u202eevil\u2028\x9b\x00\r`
	if got != want {
		t.Fatalf("escape:\n got %q\nwant %q", got, want)
	}
	for _, r := range got {
		if unsafeRune(r) {
			t.Fatalf("escape left %U in %q", r, got)
		}
	}
	var out strings.Builder
	tb := newTable(&out)
	tb.Write([]byte("APP\tHEALTH\n"))
	tb.Write([]byte("shop\t/healthz\x1b]0;t\x07\u2066\n"))
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && r != '\n' && unsafeRune(r) }) ||
		strings.Count(s, "\n") != 2 || !strings.Contains(s, `/healthz\x1b]0;t\x07\u2066`) {
		t.Fatalf("the table printed %q", s)
	}
	if escape("shop.example.com") != "shop.example.com" {
		t.Fatal("escape changed a plain value")
	}
}
