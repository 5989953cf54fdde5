package settings

// The bounds on what the strict check reads: a file's size, how deep its tables and
// lists nest, how far its YAML aliases expand, and how many problems are named.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes is the most a configuration file may hold. A file with every setting set
// and commented (deploy/node/scafo-node.yaml) is under 10 KB, so 256 KiB leaves 25 times
// that for long lists. The parsers' cost grows with the bytes: BurntSushi/toml takes
// about 2 s and 300 MB for a MiB of 4-deep tables, 4 s and 700 MB nested 15 deep (on 2
// busy cores, BenchmarkCheckFile), a quarter of that at this bound. A larger file is
// refused before a byte is parsed.
const MaxFileBytes = 256 << 10

// MaxFileDepth is how deep a configuration file's tables and lists may nest below its
// top level. The deepest setting takes 4 (acme.dns01.rfc2136.zones, a list, in three
// sections), so nothing deeper names a setting; BurntSushi/toml's parse is quadratic in
// the depth (a 16 KB chain of inline tables takes seconds), so a TOML file is measured
// by a scan of its text before it is parsed, a YAML one on yaml.v3's node tree (a linear
// parse, which yaml.v3 itself stops at 10 000 levels) before any value is made.
const MaxFileDepth = 16

// MaxAliasValues is how many values a YAML file's aliases and merge keys may stand for
// in all: a configuration that shares a list or a section through an anchor expands a
// few dozen, a "billion laughs" expands exponentially and is refused at this count.
const MaxAliasValues = 10_000

// MaxReported is how many problems a check names; the others are counted ("and 199 980
// more"), and cost what counting does (no closest-name search).
const MaxReported = 20

// problems collects a check's errors: the first MaxReported made and kept, the others
// only counted, so that a source with 200 000 mistakes costs what naming 20 does.
type problems struct {
	shown []error
	more  int
}

// add counts a problem; mk makes its error, and is called only when it will be shown.
func (p *problems) add(mk func() error) {
	if len(p.shown) >= MaxReported {
		p.more++
		return
	}
	p.shown = append(p.shown, mk())
}

// count is how many problems were found, shown or not.
func (p *problems) count() int { return len(p.shown) + p.more }

// err joins the problems shown and "and N more" (nil for none).
func (p *problems) err() error {
	if p.more == 0 {
		return errors.Join(p.shown...)
	}
	return errors.Join(append(p.shown[:len(p.shown):len(p.shown)], fmt.Errorf("and %s more", spaced(p.more)))...)
}

// spaced writes n with its thousands apart: 199 980.
func spaced(n int) string {
	s := strconv.Itoa(n)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// ReadFile reads a configuration file, refusing one over MaxFileBytes (a regular file by
// its size, before reading it; anything else, a device or a pipe, after reading one
// byte past the bound). The error names the file and the bound.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxFileBytes {
		return nil, tooLarge(path, int(fi.Size()))
	}
	content, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading config file %s: %w", path, err)
	}
	if len(content) > MaxFileBytes {
		return nil, tooLarge(path, -1)
	}
	return content, nil
}

// tooLarge is the error for a file of size bytes (-1: not known) over MaxFileBytes.
func tooLarge(path string, size int) error {
	bound := fmt.Sprintf("the %s bytes (%d KiB) a configuration file may hold", spaced(MaxFileBytes), MaxFileBytes>>10)
	if size < 0 {
		return fmt.Errorf("config file %s: more than %s: refused unread", path, bound)
	}
	return fmt.Errorf("config file %s: %s bytes, more than %s: refused unread", path, spaced(size), bound)
}

func tooDeep(path string, line int) error {
	return fmt.Errorf("config file %s: line %d: tables and lists nested more than %d deep, the most a configuration file may nest (no setting is deeper than 4): refused unread", path, line, MaxFileDepth)
}

// tomlTooDeep scans a TOML text for the first place where tables, arrays and dotted
// keys nest more than MaxFileDepth below the top level, and returns its line (0: none).
// A table header [a.b.c] is 3 deep, [[a.b]] 3 (the array and its table), a key x.y in
// it adds 1 for x, and each array or inline table a value opens adds 1. Strings and
// comments are skipped as TOML spells them; text the scan cannot read is left to the
// parser, which refuses it (the scan never stops early on a well-formed file).
func tomlTooDeep(src []byte) int {
	type open struct {
		table bool // '{' (keys follow) rather than '[' (values follow)
		depth int  // of the container itself
	}
	var (
		stack     []open
		header    int // the depth of the current [table]
		pending   int // the depth a value opened after the last key would have
		expectKey = true
		line      = 1
	)
	deep := func(d int) bool { return d > MaxFileDepth }
	base := func() int {
		if len(stack) == 0 {
			return header
		}
		return stack[len(stack)-1].depth
	}
	n := len(src)
	// skipString skips the string that starts at i (a quote), counting its lines, and
	// returns the index just past it.
	skipString := func(i int) int {
		q := src[i]
		if i+2 < n && src[i+1] == q && src[i+2] == q { // """ or '''
			for j := i + 3; j < n; j++ {
				switch {
				case src[j] == '\n':
					line++
				case src[j] == '\\' && q == '"':
					if j+1 < n && src[j+1] == '\n' {
						line++
					}
					j++
				case src[j] == q && j+2 < n && src[j+1] == q && src[j+2] == q:
					// Up to two more quotes are the string's own ("""a"""" is a"):
					// left to the scan, one would open a string to the end of the
					// line and hide what nests there from it (hostile review 2).
					k := j + 3
					for k < n && k < j+5 && src[k] == q {
						k++
					}
					return k
				}
			}
			return n
		}
		for j := i + 1; j < n; j++ {
			switch {
			case src[j] == '\n':
				return j // unterminated: the parser says so
			case src[j] == '\\' && q == '"':
				j++
			case src[j] == q:
				return j + 1
			}
		}
		return n
	}
	// key reads the key starting at i up to its '=' (or ']' for a header) and returns
	// its number of parts and the index of that end.
	key := func(i int, end byte) (int, int) {
		parts := 1
		for i < n {
			switch c := src[i]; {
			case c == end:
				return parts, i
			case c == '\n':
				return parts, i // malformed: the parser says so
			case c == '"' || c == '\'':
				i = skipString(i)
				continue
			case c == '.':
				parts++
			}
			i++
		}
		return parts, n
	}
	for i := 0; i < n; i++ {
		c := src[i]
		switch {
		case c == '\n':
			line++
			if len(stack) == 0 {
				expectKey = true
			}
			continue
		case c == ' ' || c == '\t' || c == '\r':
			continue
		case c == '#':
			for i+1 < n && src[i+1] != '\n' {
				i++
			}
			continue
		}
		if expectKey && c != '}' {
			expectKey = false
			if len(stack) == 0 && c == '[' { // a table header
				array := i+1 < n && src[i+1] == '['
				from := i + 1
				if array {
					from++
				}
				parts, end := key(from, ']')
				header = parts
				if array {
					header++
				}
				if deep(header) {
					return line
				}
				i = end
				if array && i+1 < n && src[i+1] == ']' {
					i++
				}
				continue
			}
			parts, end := key(i, '=')
			pending = base() + parts
			if deep(pending - 1) { // the tables the dotted key makes
				return line
			}
			i = end
			continue
		}
		switch c {
		case '"', '\'':
			i = skipString(i) - 1
		case '{', '[':
			d := pending
			if len(stack) > 0 && !stack[len(stack)-1].table {
				d = stack[len(stack)-1].depth + 1 // an array's element
			}
			if deep(d) {
				return line
			}
			stack = append(stack, open{table: c == '{', depth: d})
			expectKey = c == '{'
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			if len(stack) > 0 && stack[len(stack)-1].table {
				expectKey = true
			}
		}
	}
	return 0
}

// yamlReader makes the tree yaml.Unmarshal would (maps, lists, scalars as yaml.v3
// resolves them) from yaml.v3's node tree, within bounds yaml.v3's decoder lacks:
// nesting MaxFileDepth deep at most, MaxAliasValues values made through aliases and
// merge keys in all, and a mapping's repeated key found with a map (yaml.v3 compares
// every pair of a mapping's keys: 100 000 keys took a minute).
type yamlReader struct {
	path    string
	aliased int // values made through an alias so far
}

// readYAML parses content and returns its top-level mapping (empty for an empty file).
func readYAML(path string, content []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(content, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return map[string]any{}, nil
		}
		root = root.Content[0]
	}
	r := &yamlReader{path: path}
	switch {
	case root.Kind == 0 || root.Kind == yaml.ScalarNode && root.Tag == "!!null":
		return map[string]any{}, nil
	case root.Kind != yaml.MappingNode && !(root.Kind == yaml.AliasNode && root.Alias != nil && root.Alias.Kind == yaml.MappingNode):
		return nil, fmt.Errorf("%s: line %d: the file must be a mapping of sections and settings", path, root.Line)
	}
	v, err := r.value(root, 0, false)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// value makes n's value; depth is the number of mappings and sequences around n below
// the top level; through says n is reached through an alias.
func (r *yamlReader) value(n *yaml.Node, depth int, through bool) (any, error) {
	if through {
		if r.aliased++; r.aliased > MaxAliasValues {
			return nil, fmt.Errorf("config file %s: line %d: aliases stand for more than %s values, the most a configuration file may expand: refused unread", r.path, n.Line, spaced(MaxAliasValues))
		}
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("%s: line %d: unknown alias", r.path, n.Line)
		}
		return r.value(n.Alias, depth, true)
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", r.path, err)
		}
		return v, nil
	case yaml.SequenceNode:
		if depth > MaxFileDepth {
			return nil, tooDeep(r.path, n.Line)
		}
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := r.value(c, depth+1, through)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		if depth > MaxFileDepth {
			return nil, tooDeep(r.path, n.Line)
		}
		return r.mapping(n, depth, through)
	}
	return nil, fmt.Errorf("%s: line %d: not a value", r.path, n.Line)
}

// mapping makes a mapping's map: its keys, then those of its merge keys (<<) that it
// does not set itself, the first merged mapping winning, as YAML's merge key says.
func (r *yamlReader) mapping(n *yaml.Node, depth int, through bool) (map[string]any, error) {
	out := make(map[string]any, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.Tag == "!!merge" {
			merges = append(merges, vn)
			continue
		}
		if kn.Kind == yaml.AliasNode && kn.Alias != nil {
			kn = kn.Alias
		}
		if kn.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s: line %d: a key must be a name", r.path, kn.Line)
		}
		key := kn.Value // a name as written: 0010 is not 8
		if at, ok := lines[key]; ok {
			return nil, fmt.Errorf("%s: line %d: mapping key %q already defined at line %d", r.path, kn.Line, key, at)
		}
		lines[key] = kn.Line
		v, err := r.value(vn, depth+1, through)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	for _, m := range merges {
		from := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			from = m.Content
		}
		for _, f := range from {
			target := f
			if f.Kind == yaml.AliasNode && f.Alias != nil {
				target = f.Alias
			}
			if target.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("%s: line %d: a merge key (<<) takes a mapping or a list of mappings", r.path, f.Line)
			}
			v, err := r.value(f, depth, through)
			if err != nil {
				return nil, err
			}
			for k, v := range v.(map[string]any) {
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
		}
	}
	return out, nil
}
