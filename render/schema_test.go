package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The render must never emit a field Traefik v3.6 rejects: one unknown field and
// Traefik drops the whole payload. Importing Traefik's own config package would drag
// its dependency tree into our go.mod, so instead this test reads Traefik's source
// (pkg/config/dynamic and pkg/types, from the module cache) with go/parser and checks
// every key and value of the render against the structs Traefik decodes into, with the
// rules of both of Traefik's decoders:
//
//   - the HTTP provider (paerser file.DecodeContent): a key must name a Go field
//     (case-insensitively), an object or map without children is an error unless the
//     field is tagged file:"allowEmpty", file:"-" fields are refused;
//   - the plugin provider (encoding/json into dynamic.Configuration): a key must be the
//     field's json name, never "-".
//
// Values are checked against the field's type (string, int, bool, ptypes.Duration). No
// null is accepted anywhere. TestTraefikDecodesTheRender (SCAFO_TRAEFIK_DECODE=1) goes
// further and runs Traefik's real decoders and rule parser on the golden files.

const traefikModule = "github.com/traefik/traefik/v3@v3.6.12"

type traefikSchema struct {
	types map[string]map[string]ast.Expr // package ("dynamic", "types") → type name → type
}

var (
	schemaOnce sync.Once
	schema     *traefikSchema
	schemaErr  error
)

func loadTraefikSchema(t *testing.T) *traefikSchema {
	t.Helper()
	s := loadTraefikSchemaOrNil(t)
	if s == nil {
		// In CI the Traefik module is always downloaded (make test builds Traefik from
		// it first): a missing schema there is a failure, not a skip.
		if os.Getenv("CI") != "" {
			t.Fatalf("Traefik source not available (go mod download %s): %v", traefikModule, schemaErr)
		}
		t.Skipf("Traefik source not available (go mod download %s): %v", traefikModule, schemaErr)
	}
	return s
}

// loadTraefikSchemaOrNil is loadTraefikSchema without the skip, for tests that check
// the schema on the side.
func loadTraefikSchemaOrNil(t *testing.T) *traefikSchema {
	t.Helper()
	schemaOnce.Do(func() {
		modcache := os.Getenv("GOMODCACHE")
		if modcache == "" {
			out, err := exec.Command("go", "env", "GOMODCACHE").Output()
			if err != nil {
				schemaErr = fmt.Errorf("go env GOMODCACHE: %w", err)
				return
			}
			modcache = strings.TrimSpace(string(out))
		}
		root := filepath.Join(modcache, filepath.FromSlash(traefikModule))
		s := &traefikSchema{types: map[string]map[string]ast.Expr{}}
		for pkg, dir := range map[string]string{"dynamic": "pkg/config/dynamic", "types": "pkg/types", "tls": "pkg/tls"} {
			s.types[pkg] = map[string]ast.Expr{}
			files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
			if err != nil || len(files) == 0 {
				schemaErr = fmt.Errorf("no Go files in %s", filepath.Join(root, dir))
				return
			}
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
				if err != nil {
					schemaErr = err
					return
				}
				for _, d := range file.Decls {
					if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
						for _, spec := range g.Specs {
							ts := spec.(*ast.TypeSpec)
							s.types[pkg][ts.Name.Name] = ts.Type
						}
					}
				}
			}
		}
		schema = s
	})
	return schema
}

// check returns every violation of v against the Traefik type typ declared in pkg.
func (s *traefikSchema) check(path string, v any, typ ast.Expr, pkg string, allowEmpty bool) []string {
	bad := func(format string, args ...any) []string {
		return []string{path + ": " + fmt.Sprintf(format, args...)}
	}
	if v == nil {
		return bad("null (paerser skips it, encoding/json zeroes it: never meant)")
	}
	switch t := typ.(type) {
	case *ast.StarExpr:
		return s.check(path, v, t.X, pkg, allowEmpty)
	case *ast.ArrayType:
		arr, ok := v.([]any)
		if !ok {
			return bad("want an array, got %T", v)
		}
		var out []string
		for i, e := range arr {
			out = append(out, s.check(path+"["+strconv.Itoa(i)+"]", e, t.Elt, pkg, false)...)
		}
		return out
	case *ast.MapType:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("want an object, got %T", v)
		}
		if len(m) == 0 && !allowEmpty {
			return bad("empty map: Traefik's HTTP provider refuses it (not allowEmpty)")
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, s.check(path+"."+k, m[k], t.Value, pkg, false)...)
		}
		return out
	case *ast.SelectorExpr:
		x := t.X.(*ast.Ident).Name + "." + t.Sel.Name
		switch x {
		case "ptypes.Duration":
			str, ok := v.(string)
			if !ok {
				return bad("duration: want a string, got %T", v)
			}
			if _, err := time.ParseDuration(str); err != nil {
				return bad("duration %q: %v", str, err)
			}
			return nil
		case "types.Domain":
			return s.check(path, v, ast.NewIdent("Domain"), "types", allowEmpty)
		case "tls.CertAndStores", "types.FileOrContent": // fleet certificates (acme.go)
			pkg := t.X.(*ast.Ident).Name
			return s.check(path, v, ast.NewIdent(t.Sel.Name), pkg, allowEmpty)
		}
		return bad("type %s: the render never emits it", x)
	case *ast.Ident:
		switch t.Name {
		case "string":
			if _, ok := v.(string); !ok {
				return bad("want a string, got %T", v)
			}
			return nil
		case "bool":
			if _, ok := v.(bool); !ok {
				return bad("want a bool, got %T", v)
			}
			return nil
		case "int", "int64":
			n, ok := v.(json.Number)
			if !ok {
				return bad("want an integer, got %T", v)
			}
			if _, err := n.Int64(); err != nil {
				return bad("want an integer, got %s", n)
			}
			return nil
		}
		def, ok := s.types[pkg][t.Name]
		if !ok {
			return bad("type %s.%s not found in Traefik's source", pkg, t.Name)
		}
		if st, ok := def.(*ast.StructType); ok {
			return s.checkStruct(path, v, st, pkg, allowEmpty)
		}
		return s.check(path, v, def, pkg, allowEmpty)
	}
	return bad("unsupported type %T", typ)
}

type schemaField struct {
	goName, jsonName string
	tag              reflect.StructTag
	typ              ast.Expr
}

func (s *traefikSchema) fields(st *ast.StructType, pkg string) []schemaField {
	var out []schemaField
	for _, f := range st.Fields.List {
		var tag reflect.StructTag
		if f.Tag != nil {
			raw, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(raw)
		}
		if len(f.Names) == 0 { // embedded: its fields are promoted
			id, ok := f.Type.(*ast.Ident)
			if !ok {
				if se, ok := f.Type.(*ast.StarExpr); ok {
					id, _ = se.X.(*ast.Ident)
				}
			}
			if id != nil {
				if est, ok := s.types[pkg][id.Name].(*ast.StructType); ok {
					out = append(out, s.fields(est, pkg)...)
				}
			}
			continue
		}
		for _, n := range f.Names {
			if !n.IsExported() {
				continue
			}
			jsonName, _, _ := strings.Cut(tag.Get("json"), ",")
			out = append(out, schemaField{goName: n.Name, jsonName: jsonName, tag: tag, typ: f.Type})
		}
	}
	return out
}

func (s *traefikSchema) checkStruct(path string, v any, st *ast.StructType, pkg string, allowEmpty bool) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: want an object, got %T", path, v)}
	}
	if len(m) == 0 && !allowEmpty {
		return []string{path + ": empty object: Traefik's HTTP provider refuses it (field not tagged allowEmpty)"}
	}
	fields := s.fields(st, pkg)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		i := slices.IndexFunc(fields, func(f schemaField) bool { return f.jsonName == k })
		if i < 0 {
			out = append(out, fmt.Sprintf("%s: unknown field %q", path, k))
			continue
		}
		f := fields[i]
		if !strings.EqualFold(f.goName, k) {
			out = append(out, fmt.Sprintf("%s.%s: paerser matches Go field names, and %s is not %q", path, k, f.goName, k))
		}
		file := f.tag.Get("file")
		if file == "-" {
			out = append(out, fmt.Sprintf("%s.%s: field is file:\"-\" (the HTTP provider ignores it)", path, k))
		}
		out = append(out, s.check(path+"."+k, m[k], f.typ, pkg, file == "allowEmpty")...)
	}
	return out
}

func (s *traefikSchema) validate(out []byte) []string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []string{err.Error()}
	}
	return s.check("$", v, ast.NewIdent("Configuration"), "dynamic", true)
}

func TestOutputMatchesTraefikSchema(t *testing.T) {
	s := loadTraefikSchema(t)
	for _, c := range loadCases(t) {
		t.Run(c.name, func(t *testing.T) {
			out := mustTraefik(t, c.doc, c.opt)
			for _, v := range s.validate(out) {
				t.Error(v)
			}
		})
	}
	out := mustTraefik(t, sampleDoc(200), Options{CertResolver: "le", PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com"}})
	for _, v := range s.validate(out) {
		t.Error(v)
	}
}

// TestSchemaCheckRejectsWhatTraefikRejects proves the check above has teeth: each of
// these is a payload Traefik v3.6.12 refuses.
func TestSchemaCheckRejectsWhatTraefikRejects(t *testing.T) {
	s := loadTraefikSchema(t)
	lb := `{"servers":[{"url":"http://10.0.0.1:80"}],"passHostHeader":true%s}`
	for name, payload := range map[string]string{
		"unknown field":                   `{"http":{"services":{"a":{"loadBalancer":` + fmt.Sprintf(lb, `,"passiveHealthCheckz":{"maxFailedAttempts":1}`) + `}}}}`,
		"empty healthCheck on lb":         `{"http":{"services":{"a":{"loadBalancer":` + fmt.Sprintf(lb, `,"healthCheck":{}`) + `}}}}`,
		"empty passive check":             `{"http":{"services":{"a":{"loadBalancer":` + fmt.Sprintf(lb, `,"passiveHealthCheck":{}`) + `}}}}`,
		"null followRedirects":            `{"http":{"services":{"a":{"loadBalancer":` + fmt.Sprintf(lb, `,"healthCheck":{"path":"/","followRedirects":null}`) + `}}}}`,
		"bad duration":                    `{"http":{"services":{"a":{"loadBalancer":` + fmt.Sprintf(lb, `,"healthCheck":{"path":"/","interval":"5 seconds"}`) + `}}}}`,
		"empty http":                      `{"http":{}}`,
		"priority as string":              `{"http":{"routers":{"r":{"rule":"Host(` + "`a.b`" + `)","service":"a","priority":"1"}}}}`,
		"misspelled field in tls domains": `{"http":{"routers":{"r":{"rule":"x","service":"a","tls":{"domains":[{"main":"a.b","sanz":["x"]}]}}}}}`,
		"json-hidden router field":        `{"http":{"routers":{"r":{"rule":"x","service":"a","defaultRule":true}}}}`,
	} {
		v := s.validate([]byte(payload))
		if len(v) == 0 {
			t.Errorf("%s: accepted %s", name, payload)
			continue
		}
		t.Logf("%s: %s", name, v[0])
	}
	// And what it must accept: failover's healthCheck {} is allowEmpty.
	ok := `{"http":{"services":{"f":{"failover":{"service":"a","fallback":"b","healthCheck":{}}}}}}`
	if v := s.validate([]byte(ok)); len(v) != 0 {
		t.Errorf("refused a failover with healthCheck {}: %v", v)
	}
}
