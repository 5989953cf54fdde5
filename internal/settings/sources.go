package settings

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// Known indexes one configuration's settings and sections for the strict reading of
// its sources. Names are matched without regard to case, as paerser does.
type Known struct {
	list      []Setting
	envPrefix string
	byPath    map[string]Setting // lowercase path
	byEnv     map[string]Setting // upper-case variable name
	sections  map[string]string  // lowercase path → as spelled
	removed   map[string]removed // lowercase path, and variable name → a removed setting
	origins   *Origins           // where the checks record each setting's source (nil: not recorded)
}

// removed is a setting a past version had: naming it is an error that says so (not
// "unknown key"), with why.
type removed struct {
	path, why string
}

// NewKnown indexes cfg (a pointer to a configuration struct, defaults set); envPrefix
// is its variables' prefix ("" when it reads none).
func NewKnown(cfg any, envPrefix string) *Known {
	k := &Known{list: List(cfg, envPrefix), envPrefix: envPrefix, byPath: map[string]Setting{}, byEnv: map[string]Setting{}, sections: map[string]string{}}
	for _, s := range k.list {
		k.byPath[strings.ToLower(s.Path)] = s
		if s.Env != "" {
			k.byEnv[s.Env] = s
		}
	}
	for _, sec := range Sections(cfg) {
		k.sections[strings.ToLower(sec)] = sec
	}
	return k
}

// Removed registers a setting that no longer exists: a flag, variable or file key
// naming it is refused with "<path>: removed setting: <why>" (why says what replaces
// it, or that nothing does), never as an unknown one.
func (k *Known) Removed(path, why string) {
	if k.removed == nil {
		k.removed = map[string]removed{}
	}
	r := removed{path: path, why: why}
	k.removed[strings.ToLower(path)] = r
	if k.envPrefix != "" {
		k.removed[envName(k.envPrefix, path)] = r
	}
}

// removedErr is the error for a source (its spelling: a flag, a variable, a file key)
// naming a removed setting, nil when name is not one.
func (k *Known) removedErr(name, where string) error {
	r, ok := k.removed[strings.ToLower(name)]
	if !ok {
		r, ok = k.removed[name] // a variable, spelled in upper case
	}
	if !ok {
		return nil
	}
	if strings.EqualFold(name, r.path) {
		return fmt.Errorf("%s%s: removed setting: %s", name, where, r.why)
	}
	return fmt.Errorf("%s%s: removed setting %s: %s", name, where, r.path, r.why)
}

// Settings lists the settings in declaration order.
func (k *Known) Settings() []Setting { return k.list }

// Lookup finds a setting by path, without regard to case.
func (k *Known) Lookup(path string) (Setting, bool) {
	s, ok := k.byPath[strings.ToLower(path)]
	return s, ok
}

// sectionHint names a section's first setting, for "a section, not a setting".
func (k *Known) sectionHint(sec string) string {
	for _, s := range k.list {
		if strings.HasPrefix(strings.ToLower(s.Path), strings.ToLower(sec)+".") {
			return s.Path
		}
	}
	return sec
}

// CheckFlags reads args the way paerser's flag parser does (-name, --name, =value or
// the next argument, a bool without a value is true, "--" ends the flags) and returns
// every problem, each naming its flag: an unknown flag (with the closest known one), a
// value that does not parse, a section given as a flag, a missing value, an argument
// that is not a flag. aliases maps other spellings to a setting's path. At most
// MaxReported problems are named, then "and N more".
func (k *Known) CheckFlags(args []string, aliases map[string]string) error {
	var p problems
	k.checkFlags(args, aliases, &p)
	return p.err()
}

func (k *Known) checkFlags(args []string, aliases map[string]string, p *problems) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if rest := args[i+1:]; len(rest) > 0 {
				p.add(func() error { return fmt.Errorf("unexpected argument %q", rest[0]) })
			}
			break
		}
		if len(a) < 2 || a[0] != '-' {
			p.add(func() error { return fmt.Errorf("unexpected argument %q (flags are --name=value)", a) })
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		spelled := name
		if to, ok := aliases[name]; ok {
			name = to
		}
		s, ok := k.Lookup(name)
		if !ok {
			p.add(func() error {
				if err := k.removedErr(name, ""); err != nil {
					return fmt.Errorf("--%w", err)
				} else if sec, isSection := k.sections[strings.ToLower(name)]; isSection {
					return fmt.Errorf("--%s is a section, not a setting (e.g. --%s)", sec, k.sectionHint(sec))
				}
				return fmt.Errorf("unknown flag --%s%s", name, didYouMean(name, k.flagNames(), "--"))
			})
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++ // its value, most likely
			}
			continue
		}
		k.origins.set(s.Path, Origin{kind: fromFlag, name: spelled})
		if !hasValue {
			if s.Kind == Bool {
				continue
			}
			if i+1 >= len(args) {
				p.add(func() error { return fmt.Errorf("%s needs a value", s.Flag()) })
				continue
			}
			i++
			value = args[i]
		}
		if err := s.CheckValue(value); err != nil {
			p.add(func() error { return fmt.Errorf("%s: %w", s.Flag(), err) })
		}
	}
}

func (k *Known) flagNames() []string {
	names := make([]string, len(k.list))
	for i, s := range k.list {
		names[i] = s.Path
	}
	return names
}

// CheckEnv checks every variable of environ that starts with prefix: it must name a
// setting and its value must parse. ignore names the prefixed variables that belong
// to other programs (nil: none). At most MaxReported problems are named, then "and N
// more".
func (k *Known) CheckEnv(environ []string, prefix string, ignore func(name string) bool) error {
	var p problems
	k.checkEnv(environ, prefix, ignore, &p)
	return p.err()
}

func (k *Known) checkEnv(environ []string, prefix string, ignore func(name string) bool, p *problems) {
	var names []string
	for _, s := range k.list {
		names = append(names, s.Env)
	}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(strings.ToUpper(name), prefix) {
			continue
		}
		s, ok := k.byEnv[name]
		if !ok {
			if ignore != nil && ignore(name) {
				continue
			}
			p.add(func() error {
				if err := k.removedErr(name, " in the environment"); err != nil {
					return err
				}
				return fmt.Errorf("%s in the environment: not a setting%s", name, didYouMean(strings.ToUpper(name), names, ""))
			})
			continue
		}
		k.origins.set(s.Path, Origin{kind: fromEnv, name: name})
		if err := s.CheckValue(value); err != nil {
			p.add(func() error { return fmt.Errorf("%s: %w", name, err) })
		}
	}
}

// CheckFile checks a configuration file's content (YAML, or TOML by a .toml path):
// every key must name a section or a setting, a section must hold keys, a setting a
// value (a list a sequence or one value) that parses. Errors name the key's path and
// the file: `probe.interval in /etc/scafo/scafo-node.yaml: invalid duration "fast"`.
// One setting or section spelled twice (listen and Listen) is refused: which one
// paerser would read is not said. Content over MaxFileBytes, or nested deeper than
// MaxFileDepth, or (YAML) whose aliases stand for more than MaxAliasValues values, is
// refused naming the file and the bound, the first two before it is parsed. At most
// MaxReported problems are named, then "and N more".
func (k *Known) CheckFile(path string, content []byte) error {
	var p problems
	if _, err := k.checkFile(path, content, &p); err != nil {
		return err
	}
	return p.err()
}

// checkFile adds the problems of the file's keys to p and says whether the file sets
// anything (a key at its top: paerser refuses a file that does not); an error is the
// file's own (too large, too deep, not TOML or YAML), and no key was checked.
func (k *Known) checkFile(path string, content []byte, p *problems) (sets bool, err error) {
	if len(content) > MaxFileBytes {
		return false, tooLarge(path, len(content))
	}
	var data map[string]any
	switch strings.ToLower(filepath.Ext(path)) {
	case ".toml":
		if line := tomlTooDeep(content); line > 0 {
			return false, tooDeep(path, line)
		}
		data = map[string]any{}
		if err := toml.Unmarshal(content, &data); err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
	default: // paerser reads .yml, .yaml and .json as YAML and refuses the rest itself
		if data, err = readYAML(path, content); err != nil {
			return false, err
		}
	}
	k.checkTree(path, "", data, p)
	return len(data) > 0, nil
}

func (k *Known) checkTree(file, prefix string, m map[string]any, p *problems) {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	var candidates []string
	spelled := make(map[string]string, len(keys)) // lowercase path → the first key naming it
	for _, key := range keys {
		path := join(prefix, key)
		v := m[key]
		if first, twice := spelled[strings.ToLower(path)]; twice {
			p.add(func() error { return fmt.Errorf("%s in %s: given twice, as %s and %s", path, file, first, key) })
			continue
		}
		spelled[strings.ToLower(path)] = key
		if sec, ok := k.sections[strings.ToLower(path)]; ok {
			switch sub := asMap(v); {
			case sub != nil:
				k.checkTree(file, sec, sub, p)
			case v != nil:
				p.add(func() error {
					return fmt.Errorf("%s in %s: a section, not a value (its keys are like %s)", sec, file, k.sectionHint(sec))
				})
			}
			continue
		}
		s, ok := k.Lookup(path)
		if !ok {
			p.add(func() error {
				if err := k.removedErr(path, " in "+file); err != nil {
					return err
				}
				if candidates == nil {
					candidates = k.allKeys()
				}
				return fmt.Errorf("%s in %s: unknown key%s", path, file, didYouMean(path, candidates, ""))
			})
			continue
		}
		if v == nil {
			continue // "key:" with no value: paerser leaves the default
		}
		k.origins.set(s.Path, Origin{kind: fromFile, name: path, file: file})
		if err := checkFileValue(s, v); err != nil {
			p.add(func() error { return fmt.Errorf("%s in %s: %w", s.Path, file, err) })
		}
	}
}

// allKeys lists the paths of every section and setting (a key may be misplaced as
// well as misspelled).
func (k *Known) allKeys() []string {
	var out []string
	for _, sec := range k.sections {
		out = append(out, sec)
	}
	for _, s := range k.list {
		out = append(out, s.Path)
	}
	slices.Sort(out)
	return out
}

func asMap(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		return m
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[fmt.Sprint(k)] = v
		}
		return out
	}
	return nil
}

func checkFileValue(s Setting, v any) error {
	if asMap(v) != nil {
		return errors.New("a value is expected, not a section")
	}
	if items, ok := v.([]any); ok {
		if s.Kind != Strings {
			return fmt.Errorf("a single %s is expected, not a list", s.Kind)
		}
		if len(items) == 0 {
			return s.CheckValue("")
		}
		for i, it := range items {
			raw, ok := scalar(it)
			if !ok {
				return errors.New("a list of values is expected")
			}
			if err := s.checkSecret(raw); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		return nil
	}
	raw, ok := scalar(v)
	if !ok {
		return fmt.Errorf("a %s is expected", s.Kind)
	}
	return s.CheckValue(raw)
}

// scalar spells a file value as paerser does before parsing it.
func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case float64:
		return strings.TrimSuffix(strconv.FormatFloat(x, 'f', 6, 64), ".000000"), true
	}
	return "", false
}

// didYouMean is " (did you mean <dash><closest>?)", or "" when no candidate is close.
func didYouMean(name string, candidates []string, dash string) string {
	if best := Closest(name, candidates); best != "" {
		return " (did you mean " + dash + best + "?)"
	}
	return ""
}

// Closest returns the candidate nearest name (case ignored; a transposition counts as
// one edit) when it is close enough to be a typo: at most 2 edits, and at most half
// of name's length. "" when none is.
func Closest(name string, candidates []string) string {
	best, bestD := "", 3
	n := strings.ToLower(name)
	rn := utf8.RuneCountInString(n)
	for _, c := range candidates {
		if lc := utf8.RuneCountInString(c); lc < rn-2 || lc > rn+2 {
			continue // at least 3 edits apart (and a megabyte name costs no megabyte matrices)
		}
		d := editDistance(n, strings.ToLower(c))
		if d < bestD && 2*d <= len(n) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
