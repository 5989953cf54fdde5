package docs

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/traefik/paerser/cli"

	"github.com/scafo/ingress/node"
)

var update = flag.Bool("update", false, "rewrite the generated docs: docs/configuration.md, the metrics table of docs/operating.md, docs/img/*.svg")

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
	got := mustRead(t, configurationPage)
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		t.Fatalf("docs/configuration.md differs from node.Config at line %d (go test ./tools/docs -run Configuration -update):\n  page %q\n  code %q",
			i+1, append(gl, "")[i], append(wl, "")[i]) // "" past the end
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

// The reference names one flag alias (--ingress-token for --ingress.token): the node
// accepts it.
func TestTheDocumentedFlagAliasIsAccepted(t *testing.T) {
	cfg := node.NewConfig()
	cmd := &cli.Command{Name: "scafo-node", Configuration: cfg}
	if _, err := node.FlagLoader().Load([]string{"--ingress-token=0123456789abcdef0123"}, cmd); err != nil {
		t.Fatal(err)
	}
	if cfg.Ingress.Token != "0123456789abcdef0123" {
		t.Fatalf("--ingress-token set ingress.token to %q", cfg.Ingress.Token)
	}
	if !strings.Contains(notes["ingress.token"], "`--ingress-token`") {
		t.Fatal("the reference no longer names the alias")
	}
}

// The README stays an entrance (issue 28: about 250 lines at most); the subjects live
// in docs/.
func TestREADMEStaysShort(t *testing.T) {
	b := mustRead(t, "../../README.md")
	if n := strings.Count(string(b), "\n"); n > 250 {
		t.Fatalf("README.md has %d lines: move the subject into docs/ and link it", n)
	}
}
