// Package settings is a paerser configuration struct seen as the list of its settings
// (the leaves: file key, flag, environment variable, kind, default as documented), and
// the strict reading of its three sources on top of paerser: every flag, SCAFO_*
// variable and file key must name a setting (with a "did you mean" when one is close),
// and every value must parse, each error naming the setting and where it came from.
// Paerser decodes only what this package has accepted. The node's configuration
// (node/load.go), its help and its generated reference (tools/docs) and the
// command-line client's verbs read their settings here.
package settings

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	ptypes "github.com/traefik/paerser/types"
)

// Kind is what a setting's value is.
type Kind int

// The kinds of setting.
const (
	String Kind = iota
	Bool
	Int
	Float
	Duration // paerser's types.Duration: Go's syntax, a bare number is seconds
	Strings  // a list of strings: comma-separated in a flag or a variable, a sequence in a file
)

func (k Kind) String() string {
	return [...]string{"string", "bool", "integer", "number", "duration", "list"}[k]
}

// Setting is one leaf of a configuration struct.
type Setting struct {
	Path    string // the file key, as the json tag spells it: "node.apiPort"
	Env     string // "SCAFO_NODE_APIPORT" ("" without an environment prefix)
	Kind    Kind
	Default string // the default as documented ("250ms", "10m", "720h"); "" for none; a zero
	// value's default tag when it has one (`default:"<stateDir>/store"`: computed at start)
	Description string // the field's description tag
	Secret      bool   // loggable:"false": never logged
}

// Flag is the setting's flag, "--" and its path.
func (s Setting) Flag() string { return "--" + s.Path }

// Section is the setting's first path component ("" for a top-level setting).
func (s Setting) Section() string {
	sec, _, ok := strings.Cut(s.Path, ".")
	if !ok {
		return ""
	}
	return sec
}

var durationType = reflect.TypeOf(ptypes.Duration(0))

// List returns the leaves of cfg (a pointer to a struct, its defaults set) in declaration
// order. envPrefix ("SCAFO_") names the variables; "" leaves Env empty.
func List(cfg any, envPrefix string) []Setting {
	var out []Setting
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	walk(v, "", envPrefix, &out)
	return out
}

// Sections returns the paths of cfg's sections (the structs holding settings).
func Sections(cfg any) []string {
	var out []string
	t := reflect.TypeOf(cfg)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var rec func(t reflect.Type, prefix string)
	rec = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Type.Kind() != reflect.Struct || f.Type == durationType {
				continue
			}
			if f.Anonymous {
				rec(f.Type, prefix)
				continue
			}
			p := join(prefix, fieldName(f))
			out = append(out, p)
			rec(f.Type, p)
		}
	}
	rec(t, "")
	return out
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func fieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		name = strings.ToLower(f.Name[:1]) + f.Name[1:]
	}
	return name
}

func walk(v reflect.Value, prefix, envPrefix string, out *[]Setting) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			walk(fv, prefix, envPrefix, out) // paerser flattens an embedded struct
			continue
		}
		path := join(prefix, fieldName(f))
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			walk(fv, path, envPrefix, out)
			continue
		}
		s := Setting{
			Path:        path,
			Kind:        kindOf(f.Type),
			Default:     FormatValue(fv),
			Description: f.Tag.Get("description"),
			Secret:      f.Tag.Get("loggable") == "false",
		}
		if envPrefix != "" {
			s.Env = envName(envPrefix, path)
		}
		if s.Default == "" || fv.IsZero() {
			if d := f.Tag.Get("default"); d != "" {
				s.Default = d // computed where the node starts: said as the reference says it
			}
		}
		*out = append(*out, s)
	}
}

// envName is the variable of the setting at path: "SCAFO_" + "NODE_APIPORT".
func envName(envPrefix, path string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

func kindOf(t reflect.Type) Kind {
	if t == durationType {
		return Duration
	}
	switch t.Kind() {
	case reflect.Bool:
		return Bool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Int
	case reflect.Float32, reflect.Float64:
		return Float
	case reflect.Slice:
		return Strings
	}
	return String
}

// FormatValue spells a setting's value the way the reference writes it: durations as
// Go writes them without zero units ("250ms", "10m", "720h"), lists comma-separated,
// "" for an empty string or list.
func FormatValue(v reflect.Value) string {
	if v.Type() == durationType {
		return FormatDuration(time.Duration(v.Int()))
	}
	switch v.Kind() {
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v.Interface())
}

// FormatDuration is time.Duration's String without the zero units it appends ("2m0s"
// is "2m", "720h0m0s" is "720h"); 0 is "0".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	for _, z := range []string{"0s", "0m"} {
		if strings.HasSuffix(s, z) && len(s) > len(z) && !strings.HasSuffix(s, "ms") {
			if c := s[len(s)-len(z)-1]; c >= 'a' && c <= 'z' {
				s = strings.TrimSuffix(s, z)
			}
		}
	}
	return s
}

// CheckValue says what is wrong with raw as a value of s, as paerser would parse it
// (nil when it parses). The error does not name the setting: the caller adds it and
// the source.
func (s Setting) CheckValue(raw string) error {
	if err := s.checkSecret(raw); err != nil {
		return err
	}
	switch s.Kind {
	case Strings:
		// Paerser sets no list from an empty value: the default would stay, silently.
		if strings.TrimSpace(raw) == "" && s.Default != "" {
			return fmt.Errorf("an empty list is not read (the default, %s, would stay): name at least one", s.Default)
		}
	case Bool:
		if _, err := strconv.ParseBool(raw); err == nil { // paerser's reading: true, false, 1, 0, t, f
			return nil
		}
		return fmt.Errorf("%q is not a boolean (true or false)", raw)
	case Int:
		if _, err := strconv.ParseInt(raw, 10, 64); err != nil {
			return fmt.Errorf("%q is not an integer", raw)
		}
	case Float:
		if _, err := strconv.ParseFloat(raw, 64); err != nil {
			return fmt.Errorf("%q is not a number", raw)
		}
	case Duration:
		if _, err := strconv.ParseInt(raw, 10, 64); err == nil {
			return nil // seconds
		}
		if _, err := time.ParseDuration(raw); err != nil {
			return fmt.Errorf("invalid duration %q (Go's syntax: 250ms, 2s, 10m, 720h; a bare number is seconds)", raw)
		}
	}
	return nil
}

// checkSecret refuses a control character in a secret's value (a token, a key): no
// HTTP header carries one, and a newline left by a shell or an editor would make a
// token no client can send. The error names the character and its place, never the
// secret.
func (s Setting) checkSecret(raw string) error {
	if !s.Secret {
		return nil
	}
	if i, r := ControlChar(raw); i >= 0 {
		return fmt.Errorf("a control character (%U) at byte %d: a secret cannot hold one (no HTTP header carries it)", r, i)
	}
	return nil
}
