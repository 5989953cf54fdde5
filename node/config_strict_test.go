package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scafo/ingress/node"
)

// TestConfigRefusesMistakes is the configuration rows of issue 35's table, each a
// mistake the node accepted without a word (or refused without naming the setting):
// now every one stops the node with an error naming the setting, where it came from
// and, for a misspelt name, the closest setting. file is a config file's content (its
// name decides YAML or TOML), written to a temp dir and named by --configFile.
func TestConfigRefusesMistakes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		environ  []string
		file     string // "name.ext:content"
		want     []string
		notWants []string
	}{
		// a config file with `stores:`, or SCAFO_STORE_S3_BUCKET without an endpoint
		{name: "stores: in the file", file: "scafo-node.yaml:stores:\n  dir:\n    path: /x\n",
			want: []string{"stores in ", "scafo-node.yaml: unknown key (did you mean store?)"}},
		{name: "a misspelt key two levels down", file: "scafo-node.yaml:store:\n  s3:\n    buket: b\n",
			want: []string{"store.s3.buket in ", "unknown key (did you mean store.s3.bucket?)"}},
		{name: "stores in TOML", file: "scafo-node.toml:[stores.dir]\npath = \"/x\"\n",
			want: []string{"stores in ", "scafo-node.toml: unknown key (did you mean store?)"}},
		{name: "SCAFO_STORE_S3_BUCKET without an endpoint", environ: []string{"SCAFO_STORE_S3_BUCKET=scafo"},
			want: []string{"store.s3.bucket set without store.s3.endpoint"}},
		{name: "store.s3 settings without an endpoint in the file", file: "scafo-node.yaml:store:\n  s3:\n    bucket: scafo\n    insecure: true\n",
			want: []string{"store.s3.bucket, store.s3.insecure set without store.s3.endpoint"}},
		// SCAFO_LISTN, logg:, --log.level=verbose, --log.format=xml, --admin.token=short
		{name: "SCAFO_LISTN", environ: []string{"SCAFO_LISTN=:7401"},
			want: []string{"SCAFO_LISTN in the environment: not a setting (did you mean SCAFO_LISTEN?)"}},
		{name: "logg: in the file", file: "scafo-node.yaml:logg:\n  level: debug\n",
			want: []string{"logg in ", "unknown key (did you mean log?)"}},
		{name: "log.level verbose", args: []string{"--log.level=verbose"}, want: []string{`log.level "verbose": one of debug, info, warn, error`}},
		{name: "log.format xml", args: []string{"--log.format=xml"}, want: []string{`log.format "xml": one of text, json`}},
		{name: "a short admin token", args: []string{"--admin.token=short"}, want: []string{"admin.token: a token of at least 16 characters"}},
		{name: "a short ingress token", environ: []string{"SCAFO_INGRESS_TOKEN=short"}, want: []string{"ingress.token: a token of at least 16 characters"}},
		{name: "an empty traefik.entryPoints flag", args: []string{"--traefik.entryPoints="},
			want: []string{"--traefik.entryPoints: an empty list is not read"}},
		{name: "an empty traefik.entryPoints in the file", file: "scafo-node.yaml:traefik:\n  entryPoints: []\n",
			want: []string{"traefik.entryPoints in ", "an empty list is not read"}},
		// --probe.interval=fast / SCAFO_API_PUBLIC=yes / --listne=:7401
		{name: "--probe.interval=fast", args: []string{"--probe.interval=fast"}, want: []string{`--probe.interval: invalid duration "fast"`}},
		{name: "--probe.interval fast", args: []string{"--probe.interval", "fast"}, want: []string{`--probe.interval: invalid duration "fast"`}},
		{name: "probe.interval in the file", file: "scafo-node.yaml:probe:\n  interval: fast\n",
			want: []string{"probe.interval in ", `scafo-node.yaml: invalid duration "fast"`}},
		{name: "SCAFO_API_PUBLIC=yes", environ: []string{"SCAFO_API_PUBLIC=yes"}, want: []string{`SCAFO_API_PUBLIC: "yes" is not a boolean (true or false)`}},
		{name: "api.public: yes in the file", file: "scafo-node.yaml:api:\n  public: yes\n", want: []string{"api.public in ", `"yes" is not a boolean`}},
		{name: "--ports.min=low", args: []string{"--ports.min=low"}, want: []string{`--ports.min: "low" is not an integer`}},
		{name: "--listne", args: []string{"--listne=:7401"}, want: []string{"unknown flag --listne (did you mean --listen?)"}},
		{name: "--listne with its value apart", args: []string{"--listne", ":7401"}, want: []string{"unknown flag --listne (did you mean --listen?)"},
			notWants: []string{`":7401"`}},
		{name: "a section as a flag", args: []string{"--node=x"}, want: []string{"--node is a section, not a setting (e.g. --node.name)"}},
		{name: "a stray argument", args: []string{"--listen=:7401", "oops"}, want: []string{`unexpected argument "oops"`}},
		{name: "every mistake at once", args: []string{"--listne=:1"}, environ: []string{"SCAFO_LISTN=:2"}, file: "scafo-node.yaml:logg: {}\n",
			want: []string{"--listne", "SCAFO_LISTN", "logg in"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				name, content, _ := strings.Cut(tc.file, ":")
				path := filepath.Join(t.TempDir(), name)
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--configFile=" + path}, args...)
			}
			environ := append([]string{"SCAFO_STATEDIR=" + t.TempDir()}, tc.environ...)
			_, err := loadConfig(t, args, environ)
			if err == nil {
				t.Fatalf("%v %v %q: accepted", tc.args, tc.environ, tc.file)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, w := range tc.notWants {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q says %q", err, w)
				}
			}
		})
	}
}

// TestConfigAcceptsWhatItDocuments: the strict reading refuses nothing the reference
// allows: key spellings in any case (paerser's matching), the flag alias, the
// variables of the project's other programs, bools and durations in the forms paerser
// reads, and empty S3 settings beside no endpoint (the shipped file has them).
func TestConfigAcceptsWhatItDocuments(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "scafo-node.yaml")
	os.WriteFile(file, []byte("LISTEN: \":7500\"\nprobe:\n  Interval: 2\nstore:\n  s3:\n    endpoint: \"\"\n    bucket: \"\"\n    insecure: false\napi:\n  public: false\n"), 0o600)
	cfg, err := loadConfig(t, []string{"--configFile=" + file, "--ingress-token", "0123456789abcdef", "--api.public", "--reconcile.interval=1"},
		[]string{"SCAFO_STATEDIR=" + dir, "SCAFO_URL=http://x", "SCAFO_TOKEN=t", "SCAFO_INGRESS_NAME=edge", "SCAFO_ENDPOINTS=a",
			"SCAFO_TEST_S3_ENDPOINT=x", "SCAFO_BENCH=1", "SCAFO_E2E_REPORT=x", "SCAFO_LOG_LEVEL=DEBUG"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != ":7500" || cfg.Probe.Interval.String() != "2s" || !cfg.API.Public || cfg.Ingress.Token != "0123456789abcdef" ||
		cfg.Store.String() != "dir:"+filepath.Join(dir, "store") {
		t.Fatalf("loaded %+v", cfg)
	}
}

// TestStoreNamesItself: the start line's store= (StoreConfig.String).
func TestStoreNamesItself(t *testing.T) {
	for _, tc := range []struct {
		c    node.StoreConfig
		want string
	}{
		{node.StoreConfig{Dir: node.DirStoreConfig{Path: "/var/lib/scafo/store"}}, "dir:/var/lib/scafo/store"},
		{node.StoreConfig{S3: node.S3StoreConfig{Endpoint: "10.83.0.9:9000", Bucket: "scafo"}}, "s3://10.83.0.9:9000/scafo"},
		{node.StoreConfig{S3: node.S3StoreConfig{Endpoint: "https://s3.eu-west-1.amazonaws.com", Bucket: "scafo", Prefix: "/fleet-a/"}}, "s3://s3.eu-west-1.amazonaws.com/scafo/fleet-a"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.c, got, tc.want)
		}
	}
}
