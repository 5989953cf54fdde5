package localplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
)

// PP is the interface Traefik's loader converts a provider plugin to (Traefik v3.6,
// pkg/plugins/providers.go). A plugin whose New result does not satisfy it, or that
// Yaegi cannot convert to it, does not load.
type PP interface {
	Init() error
	Provide(cfgChan chan<- json.Marshaler) error
	Stop() error
}

// _PP is the Yaegi wrapper for PP, as in Traefik.
type _PP struct {
	IValue   any
	WInit    func() error
	WProvide func(cfgChan chan<- json.Marshaler) error
	WStop    func() error
}

func (p _PP) Init() error                                 { return p.WInit() }
func (p _PP) Provide(cfgChan chan<- json.Marshaler) error { return p.WProvide(cfgChan) }
func (p _PP) Stop() error                                 { return p.WStop() }

// Yaegi looks an interface's wrapper up by the interface's package path.
const ppImport = "github.com/scafo/ingress/traefikprovider/localplugin"

// YaegiOptions are the interpreter settings Traefik would use.
type YaegiOptions struct {
	Env    []string  // the environment the plugin sees (Traefik passes its own)
	Stdout io.Writer // Traefik: its logger at DEBUG level
	Stderr io.Writer // Traefik: its logger at ERROR level
}

// LoadWithYaegi loads the plugin installed under goPath (see Install) the way
// Traefik v3.6 loads a Yaegi provider plugin (pkg/plugins: newInterpreter,
// newProvider): read the manifest, import the package, call CreateConfig, decode
// config over it, and call New through a wrapper returning PP. It returns the
// provider, not yet started.
func LoadWithYaegi(goPath string, config map[string]any, opts YaegiOptions) (PP, error) {
	dir := filepath.Join(goPath, "src", filepath.FromSlash(ModuleName))
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}

	i := interp.New(interp.Options{GoPath: goPath, Env: opts.Env, Stdout: opts.Stdout, Stderr: opts.Stderr})
	if err := i.Use(stdlib.Symbols); err != nil {
		return nil, fmt.Errorf("loading stdlib symbols: %w", err)
	}
	err = i.Use(interp.Exports{ppImport + "/localplugin": {
		"PP":  reflect.ValueOf((*PP)(nil)),
		"_PP": reflect.ValueOf((*_PP)(nil)),
	}})
	if err != nil {
		return nil, fmt.Errorf("loading provider symbols: %w", err)
	}
	if _, err := i.Eval(fmt.Sprintf(`import %q`, m.Import)); err != nil {
		return nil, fmt.Errorf("importing plugin code %q: %w", m.Import, err)
	}

	basePkg := m.BasePkg
	if basePkg == "" {
		basePkg = strings.ReplaceAll(path.Base(m.Import), "-", "_")
	}
	vConfig, err := i.Eval(basePkg + `.CreateConfig()`)
	if err != nil {
		return nil, fmt.Errorf("evaluating CreateConfig: %w", err)
	}
	if err := decodeConfig(vConfig, config); err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}

	_, err = i.Eval(`package wrapper

import (
	"context"

	` + basePkg + ` "` + m.Import + `"
	"` + ppImport + `"
)

func NewWrapper(ctx context.Context, config *` + basePkg + `.Config, name string) (localplugin.PP, error) {
	p, err := ` + basePkg + `.New(ctx, config, name)
	var pv localplugin.PP = p
	return pv, err
}
`)
	if err != nil {
		return nil, fmt.Errorf("evaluating wrapper: %w", err)
	}
	fnNew, err := i.Eval("wrapper.NewWrapper")
	if err != nil {
		return nil, fmt.Errorf("evaluating NewWrapper: %w", err)
	}

	results := fnNew.Call([]reflect.Value{
		reflect.ValueOf(context.Background()), vConfig, reflect.ValueOf("plugin-scafo"),
	})
	if len(results) > 1 && results[1].Interface() != nil {
		return nil, results[1].Interface().(error)
	}
	prov, ok := results[0].Interface().(PP)
	if !ok {
		return nil, fmt.Errorf("invalid provider type: %T", results[0].Interface())
	}
	return prov, nil
}

// decodeConfig sets the fields of the struct cfg points to from config, as Traefik's
// mapstructure decoding does for the types the plugin uses: keys match field names
// case-insensitively; strings convert to bool, and to []string by splitting on ",".
func decodeConfig(cfg reflect.Value, config map[string]any) error {
	v := cfg
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return fmt.Errorf("CreateConfig returned %s, want a pointer to a struct", v.Kind())
	}
	for key, raw := range config {
		var field reflect.Value
		for j := 0; j < v.NumField(); j++ {
			if strings.EqualFold(v.Type().Field(j).Name, key) {
				field = v.Field(j)
				break
			}
		}
		if !field.IsValid() {
			continue // mapstructure ignores unknown keys
		}
		if err := setField(field, raw); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

func setField(field reflect.Value, raw any) error {
	switch field.Kind() {
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			return fmt.Errorf("want a string, got %T", raw)
		}
		field.SetString(s)
	case reflect.Bool:
		switch b := raw.(type) {
		case bool:
			field.SetBool(b)
		case string:
			parsed, err := strconv.ParseBool(b)
			if err != nil {
				return err
			}
			field.SetBool(parsed)
		default:
			return fmt.Errorf("want a bool, got %T", raw)
		}
	case reflect.Slice:
		if field.Type().Elem().Kind() != reflect.String {
			return errors.New("only []string slices are supported")
		}
		var items []string
		switch x := raw.(type) {
		case string:
			items = strings.Split(x, ",")
		case []string:
			items = x
		case []any:
			for _, it := range x {
				s, ok := it.(string)
				if !ok {
					return fmt.Errorf("want strings, got %T", it)
				}
				items = append(items, s)
			}
		default:
			return fmt.Errorf("want a list, got %T", raw)
		}
		out := reflect.MakeSlice(field.Type(), len(items), len(items))
		for j, s := range items {
			out.Index(j).SetString(s)
		}
		field.Set(out)
	default:
		return fmt.Errorf("unsupported field kind %s", field.Kind())
	}
	return nil
}
