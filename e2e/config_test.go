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

func loadShipped(t *testing.T) map[string]any { return yamlMap(t, readFile(t, shippedConfig)) }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parsed parses what a configuration function made, failing the test on its error:
// parsed(t)(staticConfig(…)).
func parsed(t *testing.T) func([]byte, error) map[string]any {
	return func(b []byte, err error) map[string]any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return yamlMap(t, b)
	}
}

// yamlMap parses a YAML document, or fails the test.
func yamlMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("parsing YAML: %v", err)
	}
	return cfg
}

// keyWant is a dotted key path of a configuration and the value it should hold.
type keyWant struct {
	path string
	want any
}

// requireKeys checks each key path of cfg against its value.
func requireKeys(t *testing.T, cfg map[string]any, want ...keyWant) {
	t.Helper()
	for _, kw := range want {
		if got := dig(cfg, strings.Split(kw.path, ".")...); !reflect.DeepEqual(got, kw.want) {
			t.Errorf("%s = %v, want %v", kw.path, got, kw.want)
		}
	}
}

// requireUnchanged checks that each dotted key path holds in got what it holds in shipped.
func requireUnchanged(t *testing.T, got, shipped map[string]any, paths ...string) {
	t.Helper()
	for _, p := range paths {
		keys := strings.Split(p, ".")
		if g, s := dig(got, keys...), dig(shipped, keys...); !reflect.DeepEqual(g, s) {
			t.Errorf("%s changed: %v, shipped %v", p, g, s)
		}
	}
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
	requireKeys(t, loadShipped(t), keyWant{"log.noColor", true}, keyWant{"accessLog.format", "json"}, keyWant{"accessLog.filePath", nil},
		keyWant{"providers.file.directory", shippedDynamicDir}, keyWant{"providers.file.watch", true})
	rendered := renderShipped(t, testIngressToken, "")
	for _, tc := range []struct {
		o             operatorSide
		dir, log, why string
	}{
		{operatorSide{}, "<nil>", "<nil>", "a test Traefik without operator files"},
		{operatorSide{dynamicDir: "/tmp/x", accessLog: true}, "/tmp/x", "json", "a test of the operator's side"},
	} {
		got := parsed(t)(staticConfig(rendered, overrides{ports: traefikPorts{web: 1, websecure: 2, api: 3}, endpointHost: "127.0.0.9:7777", operator: tc.o}))
		if d, l := fmt.Sprint(dig(got, "providers", "file", "directory")), fmt.Sprint(dig(got, "accessLog", "format")); d != tc.dir || l != tc.log {
			t.Errorf("%s: providers.file.directory %s, accessLog.format %s; want %s, %s", tc.why, d, l, tc.dir, tc.log)
		}
	}
}

func TestShippedConfigNeverPhonesHome(t *testing.T) {
	requireKeys(t, loadShipped(t), keyWant{"global.checkNewVersion", false}, keyWant{"global.sendAnonymousUsage", false},
		keyWant{"api.dashboard", false}, keyWant{"api.insecure", nil}) // the API is never exposed by the shipped file
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
			rendered := readFile(t, out)
			cfg := yamlMap(t, rendered)
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
	shipped := yamlMap(t, rendered)
	got := parsed(t)(staticConfig(rendered, overrides{ports: traefikPorts{web: 1001, websecure: 1002, api: 1003}, endpointHost: "127.0.0.9:7777"}))
	requireUnchanged(t, got, shipped, "entryPoints.web.http", "entryPoints.websecure.http", "providers.providersThrottleDuration",
		"providers.http.pollInterval", "providers.http.pollTimeout", "global", "api.dashboard")
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
	requireKeys(t, got, loopbackKeys(1001)...)
	requireKeys(t, got, keyWant{"providers.http.endpoint", "http://127.0.0.9:7777/v1/ingress/traefik?prefer=self"})

	got = parsed(t)(staticConfig(rendered, overrides{ports: traefikPorts{web: 1, websecure: 2, api: 3}, endpointHost: "127.0.0.9:7777", query: "prefer=n2", noAuthHeader: true, allowEncoded: true}))
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

// loopbackKeys are what loopbackCommon sets, the web entry point on port web and the
// next two ports websecure's and the API's.
func loopbackKeys(web int) []keyWant {
	return []keyWant{
		{"entryPoints.web.address", fmt.Sprintf("127.0.0.1:%d", web)},
		{"entryPoints.websecure.address", fmt.Sprintf("127.0.0.1:%d", web+1)},
		{"entryPoints.traefik.address", fmt.Sprintf("127.0.0.1:%d", web+2)},
		{"api.insecure", true},
		{"certificatesResolvers", nil},
	}
}
