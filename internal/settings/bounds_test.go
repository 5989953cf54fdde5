package settings

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// nestedTOML is a TOML file whose deepest value sits under depth tables or arrays, in
// one of the forms TOML nests in.
func nestedTOML(form string, depth int) string {
	switch form {
	case "inline tables":
		return "x = " + strings.Repeat("{a=", depth-1) + "{}" + strings.Repeat("}", depth-1) + "\n"
	case "arrays":
		return "x = " + strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) + "\n"
	case "dotted key":
		return strings.Repeat("a.", depth) + "b = 1\n"
	case "header":
		return "[" + strings.TrimSuffix(strings.Repeat("a.", depth), ".") + "]\nb = 1\n"
	case "array of tables":
		return "[[" + strings.TrimSuffix(strings.Repeat("a.", max(depth-1, 1)), ".") + "]]\nb = 1\n"
	case "mixed":
		half := max(depth/2, 1)
		return "# [[[[[ {{{{{ not nesting\n[" + strings.TrimSuffix(strings.Repeat("t.", half), ".") + "]\n" +
			"s = \"[[[[{{{{\" # ]]]]\nm = '''\n[[[[\n'''\n\"q.q.q\" = 1\n" +
			"x = [" + strings.Repeat("{a=[", (depth-half-1)/2) + "1" + strings.Repeat("]}", (depth-half-1)/2) + "]\n"
	}
	if str, ok := strings.CutPrefix(form, "after "); ok { // a string of quoteEnds, nesting after it on its line
		return "x = [" + str + ", " + strings.Repeat("{a=", depth-1) + "1" + strings.Repeat("}", depth-1) + "]\n"
	}
	panic(form)
}

// quoteEnds are multi-line strings ending with one or two quotes of their own ("""a""""
// is a"). The scan once took the first three for the end and the fourth for a string
// running to the end of the line, so nesting after it went unmeasured (a 12 KB file cost
// 2.3 s and 440 MB; hostile review 2).
var quoteEnds = []string{`"""q""""`, `"""q"""""`, `'''q''''`, `'''q'''''`, `""""""`, `''''''''`}

// treeDepth is how many maps and lists nest below the top level of a parsed value.
func treeDepth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, c := range x {
			d = max(d, 1+treeDepth(c))
		}
		if len(x) == 0 {
			d = 1
		}
	case []map[string]any:
		for _, c := range x {
			d = max(d, 1+treeDepth(c))
		}
	case []any:
		d = 1
		for _, c := range x {
			d = max(d, 1+treeDepth(c))
		}
	}
	return d
}

// TestTheTOMLDepthScanAgreesWithTheParser: for every form TOML nests in, the scan of the
// text refuses a file exactly when the parsed file nests deeper than MaxFileDepth (the
// parser's own tree, top level not counted); brackets in strings and comments and dots
// in quoted keys are not nesting, nor does a multi-line string ending in quotes hide any
// (quoteEnds).
func TestTheTOMLDepthScanAgreesWithTheParser(t *testing.T) {
	forms := []string{"inline tables", "arrays", "dotted key", "header", "array of tables", "mixed"}
	for _, q := range quoteEnds {
		forms = append(forms, "after "+q)
	}
	for _, form := range forms {
		for _, depth := range []int{1, 4, MaxFileDepth - 1, MaxFileDepth, MaxFileDepth + 1, MaxFileDepth + 2, 3 * MaxFileDepth} {
			src := nestedTOML(form, depth)
			data := map[string]any{}
			if err := toml.Unmarshal([]byte(src), &data); err != nil {
				t.Fatalf("%s %d: %v\n%s", form, depth, err, src)
			}
			parsed := treeDepth(data) - 1 // the top-level table
			line := tomlTooDeep([]byte(src))
			if (line > 0) != (parsed > MaxFileDepth) {
				t.Errorf("%s, %d deep as parsed: the scan says line %d (0: not too deep)\n%s", form, parsed, line, src)
			}
		}
	}
}

// TestADeeplyNestedFileIsRefused: a YAML file nested deeper than MaxFileDepth (a flow
// list, block mappings, through an alias) is refused naming the file, the line and the
// bound; MaxFileDepth levels are read (their keys checked as usual). So is a TOML file
// (40 KB of nested inline tables cost BurntSushi/toml 9 s and 1.1 GB before the strict
// check refused its key; a deep dotted key), unparsed: its depth is scanned from its
// text (TestTheTOMLDepthScanAgreesWithTheParser). BenchmarkCheckFile measures the time.
func TestADeeplyNestedFileIsRefused(t *testing.T) {
	k := NewKnown(&sample{}, "X_")
	block := func(depth int) string {
		var b strings.Builder
		for i := range depth {
			fmt.Fprintf(&b, "%sa:\n", strings.Repeat(" ", i))
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, src string
		deep      bool
	}{
		{"toml inline tables", "url = \"x\"\nevery = " + strings.Repeat("{a=", 10_000) + "1" + strings.Repeat("}", 10_000) + "\n", true},
		{"toml dotted key", "url = \"x\"\n" + strings.Repeat("a.", 20_000) + "b = 1\n", true},
		{"flow list", "url: x\nsub:\n  names: " + strings.Repeat("[", 9_000) + strings.Repeat("]", 9_000) + "\n", true},
		{"flow list at the bound", "every: " + strings.Repeat("[", MaxFileDepth) + strings.Repeat("]", MaxFileDepth) + "\n", false},
		{"flow list past the bound", "every: " + strings.Repeat("[", MaxFileDepth+1) + strings.Repeat("]", MaxFileDepth+1) + "\n", true},
		{"block mappings at the bound", block(MaxFileDepth + 1), false},
		{"block mappings past the bound", block(MaxFileDepth + 2), true},
		{"an alias nesting itself", "x: &a [*a]\n", true},
	} {
		file := "c.yaml"
		if strings.HasPrefix(tc.name, "toml") {
			file = "c.toml" // line 2, and refused unread
		}
		err := k.CheckFile(file, []byte(tc.src))
		refused := err != nil && strings.HasPrefix(err.Error(), "config file "+file+": line ") &&
			strings.Contains(err.Error(), fmt.Sprintf("tables and lists nested more than %d deep", MaxFileDepth)) &&
			(file == "c.yaml" || strings.HasPrefix(err.Error(), "config file c.toml: line 2:") && strings.Contains(err.Error(), "refused unread"))
		if refused != tc.deep || err == nil {
			t.Errorf("%s: %.300v (refused for depth: %v, want %v)", tc.name, err, refused, tc.deep)
		}
	}
}

// TestYAMLAliasesAreBounded: a "billion laughs" (ten aliases of ten aliases, nine
// times over) is refused once its aliases stand for MaxAliasValues values, naming the
// file and the bound; an anchor shared by two settings and a merge key are read as
// yaml.v3 reads them.
func TestYAMLAliasesAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	k := NewKnown(&sample{}, "X_")
	err := k.CheckFile("/etc/x/laughs.yaml", []byte(b.String()))
	if want := "aliases stand for more than 10 000 values, the most a configuration file may expand"; err == nil || !strings.HasPrefix(err.Error(), "config file /etc/x/laughs.yaml: line ") || !strings.Contains(err.Error(), want) {
		t.Errorf("billion laughs: %.300v, want %q", err, want)
	}

	data, err := readYAML("c.yaml", []byte("url: &u x\nsub:\n  <<: {count: 2, names: [y]}\n  names: [*u, *u]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(data); got != "map[sub:map[count:2 names:[x x]] url:x]" {
		t.Errorf("aliases and a merge key read as %s", got)
	}
	if err := k.CheckFile("c.yaml", []byte("url: &u x\nsub:\n  <<: {count: 2}\n  names: [*u, *u]\n")); err != nil {
		t.Errorf("an anchor and a merge key: %v", err)
	}
}

// TestAConfigFileOverTheBoundIsRefusedNamingIt: a file over MaxFileBytes stops the
// chain naming the file and the bound, whatever it holds (here comments, which the
// parsers would have read); a device that never ends is refused after the bound, not
// read to the end of memory; a file of exactly the bound is read.
func TestAConfigFileOverTheBoundIsRefusedNamingIt(t *testing.T) {
	dir := t.TempDir()
	comments := func(n int) []byte {
		b := []byte(strings.Repeat("# a comment that makes the file long enough\n", n/44+1))[:n]
		b[n-1] = '\n'
		return b
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, comments(MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Chain{EnvPrefix: "X_", Finish: func(any, *Origins) error { t.Error("Finish ran after a refusal"); return nil }}
	_, err := load(t, c, []string{"--configFile=" + big})
	if want := "config file " + big + ": 262 145 bytes, more than the 262 144 bytes (256 KiB) a configuration file may hold: refused unread"; err == nil || err.Error() != want {
		t.Errorf("%v, want %q", err, want)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := ReadFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "config file /dev/zero: more than the 262 144 bytes") {
			t.Errorf("/dev/zero: %v", err)
		}
	}
	k := NewKnown(&sample{}, "X_")
	if err := k.CheckFile("c.yaml", comments(MaxFileBytes)); err != nil {
		t.Errorf("a file of exactly the bound: %v", err)
	}
	if err := k.CheckFile("c.yaml", comments(MaxFileBytes+1)); err == nil || !strings.Contains(err.Error(), "config file c.yaml: 262 145 bytes, more than the 262 144 bytes") {
		t.Errorf("content over the bound: %v", err)
	}
}

// unknownKeys is a YAML file of n unknown keys, five bytes each: four characters, a
// digit first (no setting's name, no two alike in any case), in one flow mapping.
func unknownKeys(n int) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	keys := make([]string, n)
	for i := range keys {
		keys[i] = string([]byte{digits[i/(36*36*36)], digits[i/(36*36)%36], digits[i/36%36], digits[i%36]})
	}
	return "{" + strings.Join(keys, ",") + "}\n"
}

// TestAtMostTwentyProblemsAreNamed: a file of 200 000 unknown keys (a megabyte) is
// refused for its size, naming it; one of 50 000 (within the bound) names 20 and counts
// the rest; across sources the bound is one (flags, then variables, then the file).
func TestAtMostTwentyProblemsAreNamed(t *testing.T) {
	k := NewKnown(&sample{}, "X_")
	if err := k.CheckFile("c.yaml", []byte(unknownKeys(200_000))); err == nil || err.Error() != "config file c.yaml: 1 000 002 bytes, more than the 262 144 bytes (256 KiB) a configuration file may hold: refused unread" {
		t.Errorf("200 000 keys: %.300v", err)
	}
	src := unknownKeys(50_000)
	if len(src) > MaxFileBytes {
		t.Fatalf("%d bytes: over the size bound", len(src))
	}
	err := k.CheckFile("c.yaml", []byte(src))
	if err == nil {
		t.Fatal("nothing refused")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxReported+1 || lines[0] != "0000 in c.yaml: unknown key" || lines[MaxReported] != "and 49 980 more" {
		t.Errorf("%d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}

	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(path, []byte("nmae: 1\nsub:\n  cont: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--configFile=" + path}
	for i := range 15 {
		args = append(args, fmt.Sprintf("--flag%d=1", i))
	}
	var environ []string
	for i := range 10 {
		environ = append(environ, fmt.Sprintf("X_VAR%d=1", i))
	}
	_, err = load(t, Chain{Environ: environ, EnvPrefix: "X_"}, args)
	if err == nil {
		t.Fatal("nothing refused")
	}
	lines = strings.Split(err.Error(), "\n")
	if len(lines) != 21 || lines[0] != "unknown flag --flag0" || lines[15] != "X_VAR0 in the environment: not a setting" || lines[20] != "and 7 more" {
		t.Errorf("across sources:\n%s", err)
	}
}

func TestSpaced(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1 000", 199_980: "199 980", 1 << 20: "1 048 576", -12345: "-12 345"} {
		if got := spaced(n); got != want {
			t.Errorf("spaced(%d) = %q, want %q", n, got, want)
		}
	}
}

// BenchmarkCheckFile measures the strict check of the files the bounds are for: refused
// ones (deep TOML, deep YAML, 200 000 unknown keys) and the costliest ones accepted
// (MaxFileBytes nested MaxFileDepth deep).
func BenchmarkCheckFile(b *testing.B) {
	var deepLines strings.Builder
	for i := 0; deepLines.Len() < MaxFileBytes-200; i++ {
		fmt.Fprintf(&deepLines, "x%d = %s1%s\n", i, strings.Repeat("{a=", MaxFileDepth-1), strings.Repeat("}", MaxFileDepth-1))
	}
	for _, bc := range []struct{ name, path, src string }{
		{"toml inline tables 4000 deep 16KB", "c.toml", "x = " + strings.Repeat("{a=", 4000) + "1" + strings.Repeat("}", 4000) + "\n"},
		{"toml dotted key 4000 deep 8KB", "c.toml", strings.Repeat("a.", 4000) + "a = 1\n"},
		{"toml 256KiB of lines 15 deep", "c.toml", deepLines.String()},
		{"yaml 200000 unknown keys 1MB", "c.yaml", unknownKeys(200_000)},
		{"yaml 50000 unknown keys 250KB", "c.yaml", unknownKeys(50_000)},
		{"yaml 25000 unknown keys 125KB", "c.yaml", unknownKeys(25_000)},
		{"yaml flow list 9000 deep", "c.yaml", "x: " + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + "\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			k := NewKnown(&sample{}, "X_")
			b.SetBytes(int64(len(bc.src)))
			for b.Loop() {
				if err := k.CheckFile(bc.path, []byte(bc.src)); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
