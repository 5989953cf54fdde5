package render

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The fast encoder fails closed. encodeConfiguration writes genconf types by hand, so a
// field added to one of them (a genconf upgrade) would be dropped without a word: the
// golden files never set it, so the byte-identity tests cannot see it. This test walks,
// with reflect, every struct type reachable from Configuration through the fields the
// encoder writes, and requires encoderFields to declare every exported JSON field of
// each as written or delegated. It then sets every field alone, by reflect, to a
// non-zero value, and checks the claim: a written field is written by the fast path
// itself, byte-identical to encoding/json; a delegated one sends the configuration to
// encoding/json.

// fieldProbe is one field of one reachable struct type, at one place in a
// configuration.
type fieldProbe struct {
	owner string // encoderFields key of the struct type declaring the field
	name  string // JSON name
	path  string // where, for messages: "http.services[k].loadBalancer.servers[0].url"
	use   fieldUse
	cfg   func() *Configuration // a configuration with this field set and nothing else but its ancestors
}

// fieldInventory walks the types reachable from Configuration against table and
// returns one probe per declared field and every discrepancy, sorted.
func fieldInventory(table map[string]map[string]fieldUse) ([]fieldProbe, []string) {
	w := inventoryWalker{table: table, problems: map[string]bool{}, met: map[string]reflect.Type{}}
	root := reflect.TypeFor[Configuration]()
	w.structType(root, func(v reflect.Value) *Configuration {
		c := v.Interface().(Configuration)
		return &c
	}, "", nil)
	for key := range table {
		if _, ok := w.met[key]; !ok {
			w.problem("encoderFields lists type %s, which the encoder no longer meets", key)
		}
	}
	return w.probes, slices.Sorted(maps.Keys(w.problems))
}

type inventoryWalker struct {
	table    map[string]map[string]fieldUse
	probes   []fieldProbe
	problems map[string]bool
	met      map[string]reflect.Type // table key → the type it named
}

func (w *inventoryWalker) problem(format string, args ...any) {
	w.problems[fmt.Sprintf(format, args...)] = true
}

// wrapFunc turns a value of the type being walked into a whole configuration holding it.
type wrapFunc func(reflect.Value) *Configuration

// container walks through pointers, slices and maps to the struct types inside t.
func (w *inventoryWalker) container(t reflect.Type, wrap wrapFunc, path string, stack []reflect.Type) {
	switch t.Kind() {
	case reflect.Pointer:
		w.container(t.Elem(), func(v reflect.Value) *Configuration {
			p := reflect.New(t.Elem())
			p.Elem().Set(v)
			return wrap(p)
		}, path, stack)
	case reflect.Slice:
		w.container(t.Elem(), func(v reflect.Value) *Configuration {
			s := reflect.MakeSlice(t, 1, 1)
			s.Index(0).Set(v)
			return wrap(s)
		}, path+"[0]", stack)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			w.problem("%s: map key %s is not a string; the inventory cannot probe it", path, t.Key())
			return
		}
		w.container(t.Elem(), func(v reflect.Value) *Configuration {
			m := reflect.MakeMapWithSize(t, 1)
			m.SetMapIndex(reflect.ValueOf("k").Convert(t.Key()), v)
			return wrap(m)
		}, path+"[k]", stack)
	case reflect.Struct:
		w.structType(t, wrap, path, stack)
	case reflect.Array, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		w.problem("%s: a %s; the inventory cannot probe it", path, t)
	}
}

func (w *inventoryWalker) structType(t reflect.Type, wrap wrapFunc, path string, stack []reflect.Type) {
	if slices.Contains(stack, t) {
		return // a recursive type: its fields were checked one level up
	}
	stack = append(stack, t)
	key := t.String()
	if other, ok := w.met[key]; ok && other != t {
		w.problem("two types are both named %s (%s and %s); encoderFields cannot tell them apart", key, other.PkgPath(), t.PkgPath())
	}
	w.met[key] = t
	decl, ok := w.table[key]
	if !ok {
		w.problem("type %s (at %q) is not in encoderFields: the fast encoder would drop its fields", key, path)
		return
	}
	seen := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		fieldWrap := func(v reflect.Value) *Configuration {
			s := reflect.New(t).Elem()
			s.Field(i).Set(v)
			return wrap(s)
		}
		if f.Anonymous && name == "" {
			// encoding/json promotes an untagged embedded struct's fields: they are
			// declared under the embedded type's own name.
			if f.Type.Kind() != reflect.Struct {
				w.problem("%s.%s: embedded %s; the inventory handles embedded structs only", key, f.Name, f.Type)
				continue
			}
			w.structType(f.Type, fieldWrap, path, stack)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		seen[name] = true
		fpath := strings.TrimPrefix(path+"."+name, ".")
		use := decl[name]
		if use == 0 {
			w.problem("%s.%s (at %q) is neither written nor delegated by the fast encoder: write it in encode.go "+
				"(or make fastEncodable fall back on it) and declare it in encoderFields", key, name, fpath)
			continue
		}
		sample, err := sampleValue(f.Type)
		if err != nil {
			w.problem("%s.%s (at %q): %v", key, name, fpath, err)
			continue
		}
		w.probes = append(w.probes, fieldProbe{owner: key, name: name, path: fpath, use: use,
			cfg: func() *Configuration { return fieldWrap(sample) }})
		if use == written {
			w.container(f.Type, fieldWrap, fpath, stack)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(decl)) {
		if !seen[name] {
			w.problem("encoderFields lists %s.%s, which the type does not have", key, name)
		}
	}
}

// sampleValue is a non-zero value of t: one that encoding/json writes even under
// omitempty. Structs are their zero value (never omitted); pointers, slices and maps
// hold one sample element.
func sampleValue(t reflect.Type) (reflect.Value, error) {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Struct:
	case reflect.Pointer:
		e, err := sampleValue(t.Elem())
		if err != nil {
			return v, err
		}
		v.Set(reflect.New(t.Elem()))
		v.Elem().Set(e)
	case reflect.Slice:
		e, err := sampleValue(t.Elem())
		if err != nil {
			return v, err
		}
		v.Set(reflect.MakeSlice(t, 1, 1))
		v.Index(0).Set(e)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return v, fmt.Errorf("map key %s is not a string; teach sampleValue", t.Key())
		}
		e, err := sampleValue(t.Elem())
		if err != nil {
			return v, err
		}
		v.Set(reflect.MakeMapWithSize(t, 1))
		v.SetMapIndex(reflect.ValueOf("k").Convert(t.Key()), e)
	default:
		return v, fmt.Errorf("no sample value for a %s; teach sampleValue", t)
	}
	return v, nil
}

func TestFastEncoderFieldInventory(t *testing.T) {
	probes, problems := fieldInventory(encoderFields)
	for _, p := range problems {
		t.Error(p)
	}
	failures, nWritten, nDelegated := checkProbes(probes)
	for _, f := range failures {
		t.Error(f)
	}
	// The walk must reach the whole tree (guards against a walker that stops early).
	if nWritten < 30 || nDelegated < 6 {
		t.Errorf("only %d written and %d delegated fields probed", nWritten, nDelegated)
	}
}

// checkProbes sets each probe's field alone and checks the encoder does what the probe
// says: the same bytes as encoding/json, on the fast path for a written field, through
// encoding/json for a delegated one.
func checkProbes(probes []fieldProbe) (failures []string, nWritten, nDelegated int) {
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	for _, p := range probes {
		cfg := p.cfg()
		want, err := marshalStd(cfg)
		if err != nil {
			fail("%s: %v", p.path, err)
			continue
		}
		// The probe must actually put the field in the output, or it proves nothing.
		if !bytes.Contains(want, []byte(strconv.Quote(p.name)+":")) {
			fail("%s: the probe does not make encoding/json write %q: %s", p.path, p.name, want)
			continue
		}
		got, err := encodeConfiguration(cfg)
		if err != nil {
			fail("%s: %v", p.path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			fail("%s.%s (at %q): fast encoding differs from encoding/json:\n got  %s\n want %s", p.owner, p.name, p.path, got, want)
		}
		switch fast := fastEncodable(cfg); {
		case p.use == written && !fast:
			fail("%s.%s (at %q) is declared written, but fastEncodable sends it to encoding/json", p.owner, p.name, p.path)
		case p.use == delegated && fast:
			fail("%s.%s (at %q) is declared delegated, but fastEncodable keeps it on the fast path", p.owner, p.name, p.path)
		}
		if p.use == written {
			nWritten++
		} else {
			nDelegated++
		}
	}
	return failures, nWritten, nDelegated
}
