package settings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChainTellsFinishWhereEachSettingCameFrom: Finish gets, per setting, the source
// that set it last (file < environment < flags, whatever order the strict check read
// them in), spelled as there (an alias as typed); a setting no source set has none.
func TestChainTellsFinishWhereEachSettingCameFrom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(path, []byte("name: from-file\nsub:\n  count: 1\n  token: file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got *Origins
	c := Chain{
		Environ:   []string{"X_CONFIGFILE=" + path, "X_SUB_COUNT=2"},
		EnvPrefix: "X_",
		Aliases:   map[string]string{"token": "sub.token"},
		Finish:    func(_ any, o *Origins) error { got = o; return nil },
	}
	if _, err := load(t, c, []string{"--token=flag-token"}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"name":       "name in " + path,
		"sub.count":  "X_SUB_COUNT in the environment",
		"sub.token":  "flag --token",
		"configFile": "X_CONFIGFILE in the environment",
	} {
		if o, ok := got.Of(path); !ok || o.String() != want {
			t.Errorf("%s: %v %v, want %q", path, o, ok, want)
		}
	}
	c.Environ = nil
	if _, err := load(t, c, nil); err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Of("name"); ok {
		t.Errorf("name set by nothing: %v", o)
	}
}

// TestExplainNamesTheSourceOfEverySettingNamed: each setting an error names, and only
// those (not a quoted value that looks like one, not the tail of a longer name), gets
// its source; several are listed in the order named; an error naming none, or a nil
// Origins, is unchanged and still wraps what it wrapped.
func TestExplainNamesTheSourceOfEverySettingNamed(t *testing.T) {
	o := &Origins{paths: []string{"a.min", "a.max", "a.list", "log.level", "name"}, byPath: map[string]Origin{}}
	o.set("a.min", Origin{kind: fromFlag, name: "a.min"})
	o.set("a.min", Origin{kind: fromFile, name: "a.min", file: "/f.yaml"}) // checked later, read earlier
	o.set("a.list", Origin{kind: fromFile, name: "A.List", file: "/f.yaml"})
	o.set("name", Origin{kind: fromEnv, name: "X_NAME"})
	for _, tc := range []struct{ msg, want string }{
		{"a.min 3: too small", "a.min 3: too small (from flag --a.min)"},
		{"a.list[2]: empty", "a.list[2]: empty (from A.List in /f.yaml)"},
		{"a.max 1: inside a.min..a.max", "a.max 1: inside a.min..a.max (a.max not set, the default; a.min from flag --a.min)"},
		{`name "a.min": not a label`, `name "a.min": not a label (from X_NAME in the environment)`},
		{`name "x\"a.min": not a label`, `name "x\"a.min": not a label (from X_NAME in the environment)`},
		{"b.log.level x: names none", "b.log.level x: names none"},
		{"nothing named", "nothing named"},
	} {
		sentinel := errors.New(tc.msg)
		got := o.Explain(sentinel)
		if got.Error() != tc.want {
			t.Errorf("Explain(%q) = %q, want %q", tc.msg, got, tc.want)
		}
		if !errors.Is(got, sentinel) {
			t.Errorf("Explain(%q) no longer wraps the error", tc.msg)
		}
	}
	var none *Origins
	if err := errors.New("a.min 3: too small"); none.Explain(err) != err {
		t.Error("a nil Origins changed an error")
	}
}

// TestASecretHoldingAControlCharacterIsRefused: a secret setting's value (loggable:
// "false") holding a control character is refused in every source, naming the source
// and the character, never the value; another setting's is not this check's business.
func TestASecretHoldingAControlCharacterIsRefused(t *testing.T) {
	type cfg struct {
		Token  string   `json:"token,omitempty" loggable:"false"`
		Olds   []string `json:"olds,omitempty" loggable:"false"`
		Plain  string   `json:"plain,omitempty"`
		Olders []string `json:"olders,omitempty"`
	}
	k := NewKnown(&cfg{}, "X_")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"flag", k.CheckFlags([]string{"--token=xyzzy-value\n"}, nil), "--token: a control character (U+000A) at byte 11"},
		{"variable", k.CheckEnv([]string{"X_OLDS=xyzzy-value,xyz\x00zy"}, "X_", nil), "X_OLDS: a control character (U+0000) at byte 15"},
		{"file", k.CheckFile("/f.yaml", []byte("olds:\n  - xyzzy-value\n  - \"xyz\\x7fzy\"\n")), "olds in /f.yaml: item 1: a control character (U+007F) at byte 3"},
		{"C1", k.CheckFile("/f.yaml", []byte("token: \"xyz\\u0085zy\"\n")), "token in /f.yaml: a control character (U+0085)"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		} else if strings.Contains(tc.err.Error(), "xyz") {
			t.Errorf("%s: the refusal shows the secret: %v", tc.name, tc.err)
		}
	}
	if err := k.CheckEnv([]string{"X_PLAIN=a\tb", "X_OLDERS=a\tb"}, "X_", nil); err != nil {
		t.Errorf("a setting that is not a secret: %v", err)
	}
}

// TestControlChar: C0 (tab, newline, CR, NUL included), DEL and C1 are control
// characters; printable ASCII, spaces and other Unicode are not.
func TestControlChar(t *testing.T) {
	for _, s := range []string{"a\tb", "a\nb", "a\rb", "a\x00b", "a\x7fb", "a\u0085b", "a\u009fb", "a\x1bb"} {
		if i, _ := ControlChar(s); i != 1 {
			t.Errorf("ControlChar(%q) = %d, want 1", s, i)
		}
	}
	for _, s := range []string{"", "abc", "a b", "héllo", "€", "a~b"} {
		if i, r := ControlChar(s); i != -1 {
			t.Errorf("ControlChar(%q) = %d %U, want none", s, i, r)
		}
	}
}
