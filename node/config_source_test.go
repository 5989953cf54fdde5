package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAValidationErrorNamesItsSource: an error Validate finds names the setting and
// the source its value came from (the file and its key, the variable, the flag), the
// way the strict check's parse errors do; a later source names itself, not the one it
// overrode; an error naming several settings says where each came from, the default
// included. Before, SCAFO_PROBE_INTERVAL=5ms was refused as "probe.interval 5ms: …"
// alone, leaving the operator to find which of three sources said 5ms.
func TestAValidationErrorNamesItsSource(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scafo.yaml")
	if err := os.WriteFile(file, []byte("node:\n  name: vps-a\nprobe:\n  interval: 7ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--configFile=" + file, "--stateDir=" + t.TempDir()}
	for _, tc := range []struct {
		name    string
		args    []string
		environ []string
		want    []string
		not     []string
	}{
		{
			name: "the file",
			args: base,
			want: []string{"probe.interval 7ms", "(from probe.interval in " + file + ")"},
		},
		{
			name:    "a variable over the file",
			args:    base,
			environ: []string{"SCAFO_PROBE_INTERVAL=5ms"},
			want:    []string{"probe.interval 5ms", "(from SCAFO_PROBE_INTERVAL in the environment)"},
			not:     []string{file},
		},
		{
			name:    "a flag over the variable",
			args:    append(base[:2:2], "--probe.interval=3ms"),
			environ: []string{"SCAFO_PROBE_INTERVAL=5ms"},
			want:    []string{"probe.interval 3ms", "(from flag --probe.interval)"},
			not:     []string{"SCAFO_PROBE_INTERVAL"},
		},
		{
			name: "several settings, one of them the default",
			args: []string{"--node.name=vps-a", "--stateDir=" + t.TempDir(), "--node.apiPort=25000"},
			want: []string{"node.apiPort 25000", "node.apiPort from flag --node.apiPort", "ports.min not set, the default", "ports.max not set, the default"},
		},
		{
			name:    "a list's item",
			args:    []string{"--node.name=vps-a", "--stateDir=" + t.TempDir()},
			environ: []string{"SCAFO_ADMIN_PREVIOUS=short"},
			want:    []string{"admin.previous[0]", "(from SCAFO_ADMIN_PREVIOUS in the environment)"},
		},
	} {
		_, err := loadConfig(t, tc.args, tc.environ)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v\ndoes not say %q", tc.name, err, want)
			}
		}
		for _, not := range tc.not {
			if strings.Contains(err.Error(), not) {
				t.Errorf("%s: %v\nnames %q, which was overridden", tc.name, err, not)
			}
		}
	}
}

// TestATokenHoldingAControlCharacterIsRefused: a token (ingress, admin, their previous
// lists, and every other secret setting) holding a control character was accepted,
// though no HTTP header can carry it: a Traefik given it could never poll. It is refused
// naming the setting's source, whichever source, and never shown.
func TestATokenHoldingAControlCharacterIsRefused(t *testing.T) {
	const tok = "0123456789abcdef0123"
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		yaml    string
		args    []string
		environ []string
		want    string
	}{
		{name: "a newline in a variable", environ: []string{"SCAFO_INGRESS_TOKEN=" + tok + "\nx"}, want: "SCAFO_INGRESS_TOKEN: a control character (U+000A)"},
		{name: "a trailing CR in a variable", environ: []string{"SCAFO_ADMIN_TOKEN=" + tok + "\r"}, want: "SCAFO_ADMIN_TOKEN: a control character (U+000D)"},
		{name: "a NUL in a previous list", environ: []string{"SCAFO_INGRESS_PREVIOUS=" + tok + "," + tok + "\x00"}, want: "SCAFO_INGRESS_PREVIOUS: a control character (U+0000)"},
		{name: "a tab in a flag", args: []string{"--admin.token=" + tok + "\t"}, want: "--admin.token: a control character (U+0009)"},
		{name: "the alias", args: []string{"--ingress-token", tok + "\x7f"}, want: "--ingress.token: a control character (U+007F)"},
		{name: "a C1 in a file", yaml: "admin:\n  token: \"" + tok + "\\u0085\"\n", want: "admin.token in FILE: a control character (U+0085)"},
		{name: "an item of a file's list", yaml: "admin:\n  previous:\n    - " + tok + "\n    - \"" + tok + "\\e\"\n", want: "admin.previous in FILE: item 1: a control character (U+001B)"},
		{name: "another secret", environ: []string{"SCAFO_STORE_S3_SECRETACCESSKEY=abc\ndef"}, want: "SCAFO_STORE_S3_SECRETACCESSKEY: a control character (U+000A)"},
	} {
		args := append([]string{"--node.name=vps-a", "--stateDir=" + dir}, tc.args...)
		file := filepath.Join(t.TempDir(), "scafo.yaml")
		if tc.yaml != "" {
			if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--configFile="+file)
		}
		_, err := loadConfig(t, args, tc.environ)
		if want := strings.ReplaceAll(tc.want, "FILE", file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused with %q", tc.name, err, want)
			continue
		}
		if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), "abc") {
			t.Errorf("%s: the refusal shows the secret: %v", tc.name, err)
		}
	}
}
