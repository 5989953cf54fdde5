package node_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDeclaredMiddlewaresAreCheckedNamingTheSettingAndItsSource: traefik.middlewares
// holds name@provider references, each once, never in the fleet's own provider (http);
// a refusal names the entry and where its value came from (the file and its key, the
// variable, the flag). A valid list is kept in its order.
func TestDeclaredMiddlewaresAreCheckedNamingTheSettingAndItsSource(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scafo.yaml")
	if err := os.WriteFile(file, []byte("node:\n  name: vps-a\ntraefik:\n  middlewares: [\"auth@file\", \"basic\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--node.name=vps-a", "--stateDir=" + t.TempDir()}
	for _, tc := range []struct {
		name    string
		args    []string
		environ []string
		want    []string
	}{
		{"the file", []string{"--configFile=" + file, "--stateDir=" + t.TempDir()}, nil,
			[]string{`traefik.middlewares[1] "basic": must be name@provider`, "(from traefik.middlewares in " + file + ")"}},
		{"a variable", base, []string{"SCAFO_TRAEFIK_MIDDLEWARES=auth@file,auth@file"},
			[]string{`traefik.middlewares[1] "auth@file": declared twice (as traefik.middlewares[0])`, "(from SCAFO_TRAEFIK_MIDDLEWARES in the environment)"}},
		{"a flag", append(slices.Clone(base), "--traefik.middlewares=scafo-retry@http"), nil,
			[]string{`traefik.middlewares[0] "scafo-retry@http": provider http is the fleet's own`, "(from flag --traefik.middlewares)"}},
	} {
		_, err := loadConfig(t, tc.args, tc.environ)
		if err == nil {
			t.Fatalf("%s: accepted", tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", tc.name, err, w)
			}
		}
	}
	cfg, err := loadConfig(t, append(slices.Clone(base), "--traefik.middlewares=www-redirect@file,auth@file"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"www-redirect@file", "auth@file"}; !slices.Equal(cfg.Traefik.Middlewares, want) {
		t.Fatalf("traefik.middlewares = %q, want %q", cfg.Traefik.Middlewares, want)
	}
}
