// Package settingstest runs a package's configuration section through the node's
// chain of sources (settings.Chain: the strict check, a YAML file, SCAFO_* variables,
// flags, then the section's own normalisation and Validate, each error naming the
// source of the settings it names), so that the package that owns a section tests it
// as the node reads it: a table of flags, variables and file → the value, or the
// error's text. What spans sections is the root's (node/config_load_test.go).
package settingstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/internal/settings"
)

// EnvPrefix is the node's (node.EnvPrefix, which this package may not import).
const EnvPrefix = "SCAFO_"

// Section is one configuration section under its path, as the owning package declares
// it.
type Section[T any] struct {
	Path      string          // its path in the node's configuration: "probe"
	Defaults  func() T        // its defaults
	Normalize func(*T) error  // the loader's normalisation of it (nil: none)
	Validate  func(T) []error // its check, reporting and changing nothing
}

// Case is one row of a section's table.
type Case[T any] struct {
	Name    string
	Args    []string // flags
	Environ []string // variables (SCAFO_…)
	File    string   // a YAML file's content, named by --configFile ("" none); FILE in Want stands for its path
	// Set gives an accepted case's value: the defaults with Set applied (nil: the defaults).
	Set func(*T)
	// Want: the case is refused, with an error saying each of these; Not: nor any of these.
	Want, Not []string
}

// Load reads the section from args and environ as the node would, then normalises and
// validates it, each error naming its sources (settings.Origins.Explain).
func (s Section[T]) Load(args, environ []string) (T, error) {
	var zero T
	st := reflect.StructOf([]reflect.StructField{
		{Name: "ConfigFile", Type: reflect.TypeFor[string](), Tag: `description:"Configuration file." json:"configFile,omitempty"`},
		{Name: exported(s.Path), Type: reflect.TypeFor[T](), Tag: reflect.StructTag(fmt.Sprintf(`description:"The section." json:%q`, s.Path))},
	})
	cfg := reflect.New(st)
	cfg.Elem().Field(1).Set(reflect.ValueOf(s.Defaults()))
	section := func(c any) *T { return reflect.ValueOf(c).Elem().Field(1).Addr().Interface().(*T) }
	chain := settings.Chain{Environ: environ, EnvPrefix: EnvPrefix, Finish: func(c any, o *settings.Origins) error {
		v := section(c)
		if s.Normalize != nil {
			if err := s.Normalize(v); err != nil {
				return o.Explain(err)
			}
		}
		var errs []error
		for _, err := range s.Validate(*v) {
			errs = append(errs, o.Explain(err))
		}
		return errors.Join(errs...)
	}}
	cmd := &cli.Command{Name: "section", Configuration: cfg.Interface()}
	for _, l := range chain.Loaders() {
		done, err := l.Load(args, cmd)
		if err != nil {
			return zero, err
		}
		if done {
			break
		}
	}
	return *section(cmd.Configuration), nil
}

// Run runs the cases, each a subtest.
func (s Section[T]) Run(t *testing.T, cases []Case[T]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			args := c.Args
			file := ""
			if c.File != "" {
				file = filepath.Join(t.TempDir(), "scafo-node.yaml")
				if err := os.WriteFile(file, []byte(c.File), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--configFile=" + file}, args...)
			}
			got, err := s.Load(args, c.Environ)
			if len(c.Want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				want := s.Defaults()
				if c.Set != nil {
					c.Set(&want)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("loaded %+v\nwant   %+v", got, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			for _, w := range c.Want {
				if w = strings.ReplaceAll(w, "FILE", file); !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
			for _, w := range c.Not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("%v\nsays %q", err, w)
				}
			}
		})
	}
}

// exported is path as a Go field name (paerser matches flags and keys to field names
// in any case).
func exported(path string) string {
	r := []rune(path)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}
