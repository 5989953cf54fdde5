package e2e

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Fast checks of deploy/traefik/: they need no binaries and run under -short.

func loadShipped(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(shippedConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("parsing %s: %v", shippedConfig, err)
	}
	return cfg
}

// The seven encoded-character refusals Traefik v3.6 knows
// (pkg/config/static/entrypoints.go, EncodedCharacters); all are refused.
var pathSafety = map[string]any{
	"allowEncodedSlash":         false,
	"allowEncodedBackSlash":     false,
	"allowEncodedNullCharacter": false,
	"allowEncodedSemicolon":     false,
	"allowEncodedPercent":       false,
	"allowEncodedQuestionMark":  false,
	"allowEncodedHash":          false,
}

func TestShippedEntryPointsCarryThePathSafetySettings(t *testing.T) {
	cfg := loadShipped(t)
	for _, ep := range []string{"web", "websecure"} {
		t.Run(ep, func(t *testing.T) {
			if got := dig(cfg, "entryPoints", ep, "http", "sanitizePath"); got != true {
				t.Errorf("entryPoints.%s.http.sanitizePath = %v, want true", ep, got)
			}
			got, _ := dig(cfg, "entryPoints", ep, "http", "encodedCharacters").(map[string]any)
			if !reflect.DeepEqual(got, pathSafety) {
				t.Errorf("entryPoints.%s.http.encodedCharacters = %v, want %v", ep, got, pathSafety)
			}
		})
	}
	if got := dig(cfg, "entryPoints", "web", "address"); got != ":80" {
		t.Errorf("web address %v, want :80", got)
	}
	if got := dig(cfg, "entryPoints", "websecure", "address"); got != ":443" {
		t.Errorf("websecure address %v, want :443", got)
	}
}

// TestShippedConfigLogsForTheJournalAndReadsTheOperatorsDirectory: the shipped file
// logs without colour codes, writes a JSON access log to standard output (the journal),
// and reads the operator's own routes from the directory the package creates
// (docs/traefik.md, "Your own routes beside the fleet's"); the suite's Traefik keeps
// both when a test asks (applyOperatorSide).
func TestShippedConfigLogsForTheJournalAndReadsTheOperatorsDirectory(t *testing.T) {
	cfg := loadShipped(t)
	for _, tc := range []struct {
		keys []string
		want any
	}{
		{[]string{"log", "noColor"}, true},
		{[]string{"accessLog", "format"}, "json"},
		{[]string{"accessLog", "filePath"}, nil},
		{[]string{"providers", "file", "directory"}, shippedDynamicDir},
		{[]string{"providers", "file", "watch"}, true},
	} {
		if got := dig(cfg, tc.keys...); got != tc.want {
			t.Errorf("%s = %v, want %v", strings.Join(tc.keys, "."), got, tc.want)
		}
	}
	rendered := renderShipped(t, testIngressToken, "")
	for _, tc := range []struct {
		o             operatorSide
		dir, log, why string
	}{
		{operatorSide{}, "<nil>", "<nil>", "a test Traefik without operator files"},
		{operatorSide{dynamicDir: "/tmp/x", accessLog: true}, "/tmp/x", "json", "a test of the operator's side"},
	} {
		out, err := staticConfig(rendered, overrides{ports: traefikPorts{1, 2, 3}, endpointHost: "127.0.0.9:7777", operator: tc.o})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := yaml.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if d, l := fmt.Sprint(dig(got, "providers", "file", "directory")), fmt.Sprint(dig(got, "accessLog", "format")); d != tc.dir || l != tc.log {
			t.Errorf("%s: providers.file.directory %s, accessLog.format %s; want %s, %s", tc.why, d, l, tc.dir, tc.log)
		}
	}
}

func TestShippedConfigNeverPhonesHome(t *testing.T) {
	cfg := loadShipped(t)
	for _, tc := range []struct {
		keys []string
		want any
	}{
		{[]string{"global", "checkNewVersion"}, false},
		{[]string{"global", "sendAnonymousUsage"}, false},
		{[]string{"api", "dashboard"}, false},
		{[]string{"api", "insecure"}, nil}, // the API is never exposed by the shipped file
	} {
		if got := dig(cfg, tc.keys...); got != tc.want {
			t.Errorf("%s = %v, want %v", strings.Join(tc.keys, "."), got, tc.want)
		}
	}
}

func TestShippedProviderPollsPreferSelfWithTheTokenFromTheEnvironment(t *testing.T) {
	cfg := loadShipped(t)
	if got := dig(cfg, "providers", "providersThrottleDuration"); got != "100ms" {
		t.Errorf("providers.providersThrottleDuration = %v, want 100ms (Traefik's 2s default adds ~2s to every flip)", got)
	}
	if got := dig(cfg, "providers", "http", "pollInterval"); got != "1s" {
		t.Errorf("providers.http.pollInterval = %v, want 1s", got)
	}
	ep, _ := dig(cfg, "providers", "http", "endpoint").(string)
	u, err := url.Parse(ep)
	if err != nil || u.Host != shippedEndpointHost || u.Path != "/v1/ingress/traefik" || u.RawQuery != "prefer=self" {
		t.Errorf("providers.http.endpoint = %q, want http://%s/v1/ingress/traefik?prefer=self", ep, shippedEndpointHost)
	}
	if got := dig(cfg, "providers", "http", "headers", "Authorization"); got != "Bearer ${SCAFO_INGRESS_TOKEN}" {
		t.Errorf("providers.http.headers.Authorization = %v, want the ${SCAFO_INGRESS_TOKEN} placeholder", got)
	}
	if got := dig(cfg, "certificatesResolvers", "letsencrypt", "acme", "httpChallenge", "entryPoint"); got != "web" {
		t.Errorf("the ACME example's httpChallenge.entryPoint = %v, want web", got)
	}
}

func TestRenderConfigTakesTheTokenFromTheEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		wantErr string // substring of the script's stderr; "" means success
	}{
		{name: "hex token", env: []string{"SCAFO_INGRESS_TOKEN=" + testIngressToken}},
		{name: "base64url token", env: []string{"SCAFO_INGRESS_TOKEN=AbC-_d.~+/="}},
		{name: "unset", env: nil, wantErr: "SCAFO_INGRESS_TOKEN is not set"},
		{name: "empty", env: []string{"SCAFO_INGRESS_TOKEN="}, wantErr: "SCAFO_INGRESS_TOKEN is not set"},
		{name: "quote would break the YAML", env: []string{`SCAFO_INGRESS_TOKEN=abc"def`}, wantErr: "characters outside"},
		{name: "ampersand would break awk", env: []string{"SCAFO_INGRESS_TOKEN=a&b"}, wantErr: "characters outside"},
		{name: "newline", env: []string{"SCAFO_INGRESS_TOKEN=a\nb"}, wantErr: "characters outside"},
		{name: "ingress name with a quote", env: []string{"SCAFO_INGRESS_TOKEN=" + testIngressToken, `SCAFO_INGRESS_NAME=a"b`}, wantErr: "ingress name"},
		{name: "ingress name in capitals", env: []string{"SCAFO_INGRESS_TOKEN=" + testIngressToken, "SCAFO_INGRESS_NAME=Edge"}, wantErr: "ingress name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "traefik.yml")
			cmd := exec.Command("sh", renderScript, shippedConfig, out)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "SCAFO_INGRESS_TOKEN=") && !strings.HasPrefix(kv, "SCAFO_INGRESS_NAME=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, tc.env...)
			b, err := cmd.CombinedOutput()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(string(b), tc.wantErr) {
					t.Fatalf("err %v, output %q; want failure mentioning %q", err, b, tc.wantErr)
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("a failed render left %s behind", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("render-config.sh: %v\n%s", err, b)
			}
			st, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("rendered file mode %v, want 0600 (it holds the token)", st.Mode().Perm())
			}
			rendered, _ := os.ReadFile(out)
			var cfg map[string]any
			if err := yaml.Unmarshal(rendered, &cfg); err != nil {
				t.Fatalf("rendered file is not YAML: %v", err)
			}
			want := "Bearer " + strings.TrimPrefix(tc.env[0], "SCAFO_INGRESS_TOKEN=")
			if got := dig(cfg, "providers", "http", "headers", "Authorization"); got != want {
				t.Errorf("Authorization = %q, want %q", got, want)
			}
			if strings.Contains(string(rendered), "${SCAFO_INGRESS_TOKEN}") {
				t.Error("placeholder left in the rendered file")
			}
			// Everything else is byte-for-byte the template.
			tmpl, _ := os.ReadFile(shippedConfig)
			name, _ := dig(cfg, "providers", "http", "headers", "X-Scafo-Ingress").(string)
			if host, _ := os.Hostname(); !strings.HasPrefix(strings.ToLower(host), name) || name == "" {
				t.Errorf("X-Scafo-Ingress = %q, want the host name %q (SCAFO_INGRESS_NAME unset)", name, host)
			}
			got := strings.ReplaceAll(string(tmpl), "${SCAFO_INGRESS_TOKEN}", strings.TrimPrefix(want, "Bearer "))
			if got = strings.ReplaceAll(got, "${SCAFO_INGRESS_NAME}", name); got != string(rendered) {
				t.Error("render changed more than the placeholder")
			}
		})
	}
}

// The suite's Traefik runs the shipped settings: staticConfig may only move listen
// addresses and the endpoint's host, drop the ACME resolver and add the API.
func TestStaticConfigKeepsTheShippedSettings(t *testing.T) {
	rendered := renderShipped(t, testIngressToken, "")
	var shipped map[string]any
	if err := yaml.Unmarshal(rendered, &shipped); err != nil {
		t.Fatal(err)
	}
	out, err := staticConfig(rendered, overrides{ports: traefikPorts{web: 1001, websecure: 1002, api: 1003}, endpointHost: "127.0.0.9:7777"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, keys := range [][]string{
		{"entryPoints", "web", "http"},
		{"entryPoints", "websecure", "http"},
		{"providers", "providersThrottleDuration"},
		{"providers", "http", "pollInterval"},
		{"providers", "http", "pollTimeout"},
		{"global"},
		{"api", "dashboard"},
	} {
		if !reflect.DeepEqual(dig(got, keys...), dig(shipped, keys...)) {
			t.Errorf("%s changed: %v, shipped %v", strings.Join(keys, "."), dig(got, keys...), dig(shipped, keys...))
		}
	}
	// The headers are the shipped ones, the applied probe's port aside (the web entry
	// point's, on loopback).
	gotHeaders, _ := dig(got, "providers", "http", "headers").(map[string]any)
	shippedHeaders, _ := dig(shipped, "providers", "http", "headers").(map[string]any)
	if gotHeaders[appliedProbeHeader] != "http://127.0.0.1:1001" || shippedHeaders[appliedProbeHeader] != shippedAppliedProbe {
		t.Errorf("%s: shipped %v, run %v; want %s rewritten to the web entry point", appliedProbeHeader,
			shippedHeaders[appliedProbeHeader], gotHeaders[appliedProbeHeader], shippedAppliedProbe)
	}
	for k, v := range shippedHeaders {
		if k != appliedProbeHeader && gotHeaders[k] != v {
			t.Errorf("providers.http.headers.%s changed: %v, shipped %v", k, gotHeaders[k], v)
		}
	}
	if len(gotHeaders) != len(shippedHeaders) {
		t.Errorf("providers.http.headers: %v, shipped %v", gotHeaders, shippedHeaders)
	}
	for _, tc := range []struct {
		keys []string
		want any
	}{
		{[]string{"entryPoints", "web", "address"}, "127.0.0.1:1001"},
		{[]string{"entryPoints", "websecure", "address"}, "127.0.0.1:1002"},
		{[]string{"entryPoints", "traefik", "address"}, "127.0.0.1:1003"},
		{[]string{"providers", "http", "endpoint"}, "http://127.0.0.9:7777/v1/ingress/traefik?prefer=self"},
		{[]string{"api", "insecure"}, true},
		{[]string{"certificatesResolvers"}, nil},
	} {
		if g := dig(got, tc.keys...); !reflect.DeepEqual(g, tc.want) {
			t.Errorf("%s = %v, want %v", strings.Join(tc.keys, "."), g, tc.want)
		}
	}

	out, err = staticConfig(rendered, overrides{ports: traefikPorts{1, 2, 3}, endpointHost: "127.0.0.9:7777", query: "prefer=n2", noAuthHeader: true, allowEncoded: true})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if g := dig(got, "providers", "http", "endpoint"); g != "http://127.0.0.9:7777/v1/ingress/traefik?prefer=n2" {
		t.Errorf("endpoint with a query override = %v", g)
	}
	if g := dig(got, "providers", "http", "headers", "Authorization"); g != nil {
		t.Errorf("noAuthHeader left Authorization = %v", g)
	}
	for _, ep := range []string{"web", "websecure"} {
		ec, _ := dig(got, "entryPoints", ep, "http", "encodedCharacters").(map[string]any)
		if len(ec) != len(pathSafety) {
			t.Errorf("allowEncoded: %s has %d options, want %d", ep, len(ec), len(pathSafety))
		}
		for k, v := range ec {
			if v != true {
				t.Errorf("allowEncoded: %s %s = %v, want true", ep, k, v)
			}
		}
	}
}
