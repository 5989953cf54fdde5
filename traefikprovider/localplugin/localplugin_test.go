package localplugin

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const goodManifest = `displayName: scafo ingress
type: provider
import: github.com/scafo/ingress/traefikprovider
summary: >-
  Reads the dynamic configuration
  from scafo nodes.

testData:
  endpoints:
    - http://10.83.0.1:7400
`

func TestReadManifest(t *testing.T) {
	cases := []struct {
		name     string
		manifest string
		wantErr  string
	}{
		{name: "valid", manifest: goodManifest},
		{name: "middleware", manifest: strings.Replace(goodManifest, "type: provider", "type: middleware", 1), wantErr: `type is "middleware", want provider`},
		{name: "wasm", manifest: goodManifest + "runtime: wasm\n", wantErr: `runtime is "wasm"`},
		{name: "foreign import", manifest: strings.Replace(goodManifest, "github.com/scafo/ingress/traefikprovider", "github.com/other/plugin", 1), wantErr: "must start with the module name"},
		{name: "no display name", manifest: strings.Replace(goodManifest, "displayName: scafo ingress\n", "", 1), wantErr: "missing displayName"},
		{name: "no summary", manifest: strings.Replace(goodManifest, "summary: >-\n  Reads the dynamic configuration\n  from scafo nodes.\n", "", 1), wantErr: "missing summary"},
		{name: "no test data", manifest: strings.Split(goodManifest, "testData:")[0], wantErr: "missing testData"},
		{name: "not YAML we read", manifest: "just words\n", wantErr: "unexpected line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(tc.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := ReadManifest(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Summary != "Reads the dynamic configuration from scafo nodes." {
				t.Errorf("summary %q", m.Summary)
			}
		})
	}
}

func TestInstallCopiesOnlyThePlugin(t *testing.T) {
	src, err := SourceDir()
	if err != nil {
		t.Fatal(err)
	}
	goPath := t.TempDir()
	dst, err := Install(src, goPath)
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	if want := filepath.Join(goPath, "src", "github.com", "scafo", "ingress", "traefikprovider"); dst != want {
		t.Errorf("installed to %s, want %s", dst, want)
	}
	entries, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if e.IsDir() || strings.HasSuffix(e.Name(), "_test.go") {
			t.Errorf("installed %s; only the manifest and non-test sources belong there", e.Name())
		}
	}
	sort.Strings(names)
	if len(names) < 2 || names[0] != ManifestFile {
		t.Errorf("installed %v, want the manifest and the sources", names)
	}
}
