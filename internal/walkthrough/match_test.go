package walkthrough

import "testing"

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"a <x> c", "a bb c", true},
		{"a <x> c", "a b b c", false},
		{"t=… x", "t=1 2 x", true},
		{"a\n…\nz", "a\nb\nc\nz", true},
		{"a\n…\nz", "a\nz", true},
		{"a", "a\nb", false},
		{"a", "b\na", false},
		{"a", "a\n\n", true},
		{"HTTP/1.1 200 OK", "HTTP/1.1 200 OK\r\n", true},
		{"a.c", "abc", false}, // a dot is a dot
		{`{"id":"<id>","n":1}`, `{"id":"f00","n":1}`, true},
		{`["api.0.<hostname>"]`, `["api.0.vm"]`, true},
	} {
		if got := Match(c.want, c.got); got != c.ok {
			t.Errorf("Match(%q, %q) = %v", c.want, c.got, got)
		}
	}
}
