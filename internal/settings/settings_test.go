package settings

import (
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

func TestFormatDuration(t *testing.T) {
	for in, want := range map[string]string{"2m0s": "2m", "720h0m0s": "720h", "1h0m0s": "1h", "250ms": "250ms", "1m30s": "1m30s", "10s": "10s", "1h30m0s": "1h30m", "0s": "0"} {
		d, err := time.ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"stores", []string{"store", "stateDir", "listen"}, "store"},
		{"logg", []string{"log", "listen"}, "log"},
		{"SCAFO_LISTN", []string{"SCAFO_LISTEN", "SCAFO_LOG_LEVEL"}, "SCAFO_LISTEN"},
		{"listne", []string{"listen", "log.level"}, "listen"}, // a transposition is one edit
		{"jsno", []string{"json", "url"}, "json"},
		{"pt", []string{"put", "get", "rm"}, "put"},
		{"node.naem", []string{"node.name", "node.address"}, "node.name"},
		{"frobnicate", []string{"listen", "store"}, ""},
		{"x", []string{"y"}, ""}, // one letter is not a typo of another
	} {
		if got := Closest(tc.name, tc.candidates); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

type Conn struct {
	URL string `json:"url,omitempty"`
}

type sample struct {
	Conn
	JSON  bool            `json:"json,omitempty"`
	Every ptypes.Duration `json:"every,omitempty"`
	Sub   struct {
		Names []string `json:"names,omitempty"`
		Count int      `json:"count,omitempty"`
		Dir   string   `json:"dir,omitempty" default:"<stateDir>/x"`
	} `json:"sub"`
}

// TestKnownFlags: an embedded struct's settings are flags of their own (paerser's
// flattening), sections are not settings, values are checked by kind.
func TestKnownFlags(t *testing.T) {
	cfg := &sample{Every: ptypes.Duration(250 * time.Millisecond)}
	cfg.Sub.Names = []string{"a"}
	k := NewKnown(cfg, "X_")
	var paths []string
	for _, s := range k.Settings() {
		paths = append(paths, s.Path+"="+s.Default+"/"+s.Env)
	}
	if got, want := strings.Join(paths, " "), "url=/X_URL json=false/X_JSON every=250ms/X_EVERY sub.names=a/X_SUB_NAMES sub.count=0/X_SUB_COUNT sub.dir=<stateDir>/x/X_SUB_DIR"; got != want {
		t.Fatalf("settings %s, want %s", got, want)
	}
	for _, tc := range []struct {
		args []string
		want string // "" accepted
	}{
		{[]string{"--url=http://x", "--json", "--every", "2s", "-sub.count=3", "--SUB.NAMES=a,b"}, ""},
		{[]string{"--every=1"}, ""}, // seconds
		{[]string{"--json=false"}, ""},
		{[]string{"--jsno"}, "unknown flag --jsno (did you mean --json?)"},
		{[]string{"--json=yes"}, `--json: "yes" is not a boolean (true or false)`},
		{[]string{"--sub.count=many"}, `--sub.count: "many" is not an integer`},
		{[]string{"--sub"}, "--sub is a section, not a setting (e.g. --sub.names)"},
		{[]string{"--sub.names="}, "--sub.names: an empty list is not read (the default, a, would stay)"},
		{[]string{"--every"}, "--every needs a value"},
		{[]string{"--url=x", "extra"}, `unexpected argument "extra"`},
	} {
		err := k.CheckFlags(tc.args, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestKnownFile: a file's keys are settings (in any case, once each), its values of
// their kinds.
func TestKnownFile(t *testing.T) {
	k := NewKnown(&sample{}, "X_")
	for _, tc := range []struct {
		path, content, want string
	}{
		{"c.yaml", "url: x\nSub:\n  count: 2\n  names: [a, b]\n", ""},
		{"c.yaml", "sub:\n  cont: 2\n", "sub.cont in c.yaml: unknown key (did you mean sub.count?)"},
		{"c.yaml", "sub: 3\n", "sub in c.yaml: a section, not a value"},
		{"c.yaml", "sub:\n  count: [1]\n", "sub.count in c.yaml: a single integer is expected, not a list"},
		{"c.toml", "every = \"soon\"\n", `every in c.toml: invalid duration "soon"`},
		{"c.toml", "[sub]\ncount = 2\n", ""},
		{"c.yaml", "url: [\n", "c.yaml: "},
		{"c.yaml", "url: a\nURL: b\n", "url in c.yaml: given twice, as URL and url"},
		{"c.yaml", "sub:\n  count: 1\nSub:\n  count: 2\n", "sub in c.yaml: given twice, as Sub and sub"},
		{"c.toml", "[sub]\ncount = 1\nCount = 2\n", "sub.count in c.toml: given twice, as Count and count"},
		{"c.yaml", "url: a\nurl: b\n", `c.yaml: line 2: mapping key "url" already defined at line 1`},
	} {
		err := k.CheckFile(tc.path, []byte(tc.content))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.content, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.content, err, tc.want)
		}
	}
}

func TestKnownEnv(t *testing.T) {
	k := NewKnown(&sample{}, "X_")
	err := k.CheckEnv([]string{"X_URL=u", "X_JSNO=1", "X_JSON=maybe", "X_OTHER=1", "HOME=/"}, "X_", func(n string) bool { return n == "X_OTHER" })
	if err == nil || err.Error() != "X_JSNO in the environment: not a setting (did you mean X_JSON?)\n"+`X_JSON: "maybe" is not a boolean (true or false)` {
		t.Fatalf("%v", err)
	}
}

// TestARemovedSettingIsNamedAsRemoved: a flag, variable or file key naming a removed
// setting is refused with the setting's path and why, not as an unknown name; its
// neighbours are still checked as before.
func TestARemovedSettingIsNamedAsRemoved(t *testing.T) {
	k := NewKnown(&sample{}, "X_")
	k.Removed("sub.proxies", "X-Forwarded-For is no longer read")
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"flag", k.CheckFlags([]string{"--sub.proxies=10.0.0.0/8", "--url=u"}, nil), "--sub.proxies: removed setting: X-Forwarded-For is no longer read"},
		{"flag, other case, value apart", k.CheckFlags([]string{"--Sub.Proxies", "10.0.0.0/8"}, nil), "--Sub.Proxies: removed setting: X-Forwarded-For is no longer read"},
		{"variable", k.CheckEnv([]string{"X_SUB_PROXIES=10.0.0.0/8"}, "X_", nil), "X_SUB_PROXIES in the environment: removed setting sub.proxies: X-Forwarded-For is no longer read"},
		{"file", k.CheckFile("c.yaml", []byte("sub:\n  proxies: [10.0.0.0/8]\n  count: 2\n")), "sub.proxies in c.yaml: removed setting: X-Forwarded-For is no longer read"},
		{"toml file", k.CheckFile("c.toml", []byte("[sub]\nproxies = [\"10.0.0.0/8\"]\n")), "sub.proxies in c.toml: removed setting: X-Forwarded-For is no longer read"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("%s: %v, want %q (and nothing else)", tc.what, tc.err, tc.want)
		}
	}
	// Not a removed one: unknown, as before.
	if err := k.CheckFlags([]string{"--sub.proxy=1"}, nil); err == nil || !strings.Contains(err.Error(), "unknown flag --sub.proxy") {
		t.Errorf("a misspelling of nothing known: %v", err)
	}
}
