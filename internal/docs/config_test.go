package docs

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from node.Config")

const configurationPage = "../../docs/configuration.md"

// docs/configuration.md is generated from node.Config: a setting added, renamed or
// removed, a default or a description changed, and the page differs until it is
// regenerated (-update).
func TestConfigurationReferenceIsGeneratedFromTheCode(t *testing.T) {
	want, err := ConfigurationMarkdown()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(configurationPage, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(configurationPage)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/configuration.md differs from node.Config at line %d (go test ./internal/docs -run Configuration -update):\n  page %q\n  code %q", i+1, g, w)
			}
		}
	}
}

// Every setting the node parses is on the page with its flag, its variable and a
// description; Settings itself checks the names against paerser's flag and env
// encoders, so a field renamed in one place only fails here.
func TestEverySettingHasAFlagAVariableAndADescription(t *testing.T) {
	settings, err := Settings()
	if err != nil {
		t.Fatal(err)
	}
	if len(settings) < 50 {
		t.Fatalf("only %d settings found: the walk of node.Config is broken", len(settings))
	}
	page, err := ConfigurationMarkdown()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		if strings.TrimSpace(s.Description) == "" {
			t.Errorf("%s has no description tag: the reference (and --help) would say nothing of it", s.Path)
		}
		row := "| `" + s.Path + "` | `" + s.Flag + "` | `" + s.Env + "` |"
		if !bytes.Contains(page, []byte(row)) {
			t.Errorf("no row %q", row)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for in, want := range map[string]string{"2m0s": "2m", "720h0m0s": "720h", "1h0m0s": "1h", "250ms": "250ms", "1m30s": "1m30s", "10s": "10s", "1h30m0s": "1h30m"} {
		d, err := parseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %s, want %s", in, got, want)
		}
	}
}

var parseDuration = time.ParseDuration
