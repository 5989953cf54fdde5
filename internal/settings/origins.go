package settings

// Where each setting's value came from, so that an error found after the sources were
// read (a configuration's Validate) names the source as the strict check's errors do.

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// sourceKind orders the sources as the chain reads them: a later one overrides.
type sourceKind int

const (
	fromFile sourceKind = iota + 1
	fromEnv
	fromFlag
)

// Origin is the source that set one setting: a file's key, a variable or a flag, as
// spelled there.
type Origin struct {
	kind sourceKind
	name string // the key, the variable, or the flag without its dashes
	file string // the file, for a key
}

// String names the source the way the strict check's errors do:
// "probe.interval in /etc/scafo/scafo-node.yaml", "SCAFO_PROBE_INTERVAL in the
// environment", "flag --probe.interval".
func (o Origin) String() string {
	switch o.kind {
	case fromFile:
		return o.name + " in " + o.file
	case fromEnv:
		return o.name + " in the environment"
	case fromFlag:
		return "flag --" + o.name
	}
	return "the default"
}

// Origins records, per setting path, the source that set it last (file < environment <
// flags, as the chain reads them). The chain fills it while it checks the sources and
// hands it to Finish. A nil *Origins knows nothing (a configuration built in code): its
// Explain changes no error.
type Origins struct {
	paths  []string          // every setting's path, as the configuration spells it
	byPath map[string]Origin // lowercase path
}

func newOrigins(k *Known) *Origins {
	o := &Origins{byPath: map[string]Origin{}}
	for _, s := range k.list {
		o.paths = append(o.paths, s.Path)
	}
	return o
}

// set records that a source set path; an earlier source in the chain's order never
// replaces a later one, whatever order they are checked in.
func (o *Origins) set(path string, src Origin) {
	if o == nil {
		return
	}
	key := strings.ToLower(path)
	if prev, ok := o.byPath[key]; ok && prev.kind > src.kind {
		return
	}
	o.byPath[key] = src
}

// Of returns the source that set the setting at path; false when none did (its value
// is the default, or derived from another setting).
func (o *Origins) Of(path string) (Origin, bool) {
	if o == nil {
		return Origin{}, false
	}
	src, ok := o.byPath[strings.ToLower(path)]
	return src, ok
}

// Explain adds to err the source of every setting its message names (outside quoted
// values): "probe.interval 5ms: … (from SCAFO_PROBE_INTERVAL in the environment)",
// "node.apiPort 7400: inside ports.min..ports.max … (node.apiPort from flag
// --node.apiPort; ports.min not set, the default; …)". An error naming no setting, or
// a nil Origins, is returned as it is; the result wraps err.
func (o *Origins) Explain(err error) error {
	if o == nil || err == nil {
		return err
	}
	named := namedPaths(err.Error(), o.paths)
	if len(named) == 0 {
		return err
	}
	says := func(path string) string {
		if src, ok := o.Of(path); ok {
			return "from " + src.String()
		}
		return "not set, the default"
	}
	if len(named) == 1 {
		return fmt.Errorf("%w (%s)", err, says(named[0]))
	}
	parts := make([]string, len(named))
	for i, p := range named {
		parts[i] = p + " " + says(p)
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(parts, "; "))
}

// namedPaths lists the paths msg names, in the order they first appear: each as a
// whole word (not part of a longer name: "ingress.previous[1]" names ingress.previous,
// "ports.min..ports.max" both ports), outside the double-quoted values %q spells (a
// value is not a setting's name).
func namedPaths(msg string, paths []string) []string {
	quoted := make([]bool, len(msg))
	in := false
	for i := 0; i < len(msg); i++ {
		switch {
		case in && msg[i] == '\\' && i+1 < len(msg):
			quoted[i], quoted[i+1] = true, true
			i++
			continue
		case msg[i] == '"':
			in = !in
		}
		quoted[i] = in || msg[i] == '"'
	}
	nameByte := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	first := map[string]int{}
	for _, p := range paths {
		for from := 0; ; {
			i := strings.Index(msg[from:], p)
			if i < 0 {
				break
			}
			i += from
			end := i + len(p)
			from = i + 1
			// Not the tail of a longer path ("log.level" in "x.log.level"), but a range's
			// second end ("ports.min..ports.max").
			tail := i > 0 && msg[i-1] == '.' && (i < 2 || msg[i-2] != '.')
			if quoted[i] || i > 0 && nameByte(msg[i-1]) || tail || end < len(msg) && nameByte(msg[end]) {
				continue
			}
			first[p] = i
			break
		}
	}
	out := make([]string, 0, len(first))
	for p := range first {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b string) int { return first[a] - first[b] }) // no two leaves start at one place
	return out
}

// ControlChar finds the first control character in s (C0 including tab, newline, CR
// and NUL; DEL; C1): its byte offset and the character, or -1. No HTTP header, and no
// secret a protocol carries, holds one.
func ControlChar(s string) (int, rune) {
	for i, r := range s {
		if unicode.IsControl(r) {
			return i, r
		}
	}
	return -1, 0
}
