package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/traefik/paerser/cli"
	"github.com/traefik/paerser/flag"
	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
)

// loadConfig runs args and environ through paerser the way scafo-node's root command
// does (cli.Execute, Loaders as its Resources) and returns what Run received.
func loadConfig(t *testing.T, args, environ []string) (*node.Config, error) {
	t.Helper()
	var got *node.Config
	cmd := &cli.Command{
		Name:          "scafo-node",
		Configuration: node.NewConfig(),
		Resources:     node.Loaders(environ),
	}
	cmd.Run = func([]string) error {
		got = cmd.Configuration.(*node.Config)
		return nil
	}
	saved := os.Args
	os.Args = append([]string{"scafo-node"}, args...)
	defer func() { os.Args = saved }()
	if err := cli.Execute(cmd); err != nil {
		return nil, err
	}
	if got == nil {
		t.Fatalf("%v: Run was not called", args)
	}
	return got, nil
}

func TestConfigLayering(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scafo.yaml")
	os.WriteFile(file, []byte("listen: \":7500\"\nplatform:\n  domains: [\"apps.example.com\"]\nnode:\n  name: from-file\n"), 0o600)
	cfg, err := loadConfig(t, []string{"--configFile=" + file, "--node.name=from-flag", "--ingress-token=tok-0123456789abcdef"},
		[]string{"SCAFO_ADMIN_TOKEN=adm-0123456789abcdef", "SCAFO_STATEDIR=/tmp/x"})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %v %s %s %s %d", cfg.Listen, cfg.Node.Name, cfg.Platform.Domains, cfg.Ingress.Token, cfg.Admin.Token, cfg.StateDir, cfg.Node.APIPort)
	want := ":7500 from-flag [apps.example.com] tok-0123456789abcdef adm-0123456789abcdef /tmp/x 7500"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node.name=Bad_Name"}, "node.name"},
		{[]string{"--platform.domains=apps..example"}, "platform.domains"},
		{[]string{"--ports.quarantine=1s"}, "ports.quarantine"},
		{[]string{"--node.address=not-an-ip"}, "node.address"},
	} {
		_, err := loadConfig(t, tc.args, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %s", tc.args, err, tc.want)
		}
	}
}

// TestConfigSources: the file named in the environment, environment over file, flags
// over environment, the --ingress-token alias in each spelling, and the defaults (with
// their derived values) when nothing is given.
func TestConfigSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "scafo.toml")
	os.WriteFile(file, []byte("listen = \"127.0.0.1:7600\"\n[node]\nname = \"from-file\"\naddress = \"10.0.0.1\"\n"), 0o600)
	cfg, err := loadConfig(t, []string{"--node.address=10.0.0.3"},
		[]string{"SCAFO_CONFIGFILE=" + file, "SCAFO_NODE_NAME=from-env", "SCAFO_NODE_ADDRESS=10.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Listen + " " + cfg.Node.Name + " " + cfg.Node.Address; got != "127.0.0.1:7600 from-env 10.0.0.3" {
		t.Fatalf("layering: got %q", got)
	}

	const tok = "tok-0123456789abcdef"
	for _, args := range [][]string{
		{"--ingress-token", tok}, {"-ingress-token=" + tok}, {"--ingress-token=" + tok}, {"--ingress.token=" + tok},
	} {
		cfg, err := loadConfig(t, args, []string{"SCAFO_INGRESS_TOKEN=env-0123456789abcdef"})
		if err != nil || cfg.Ingress.Token != tok {
			t.Errorf("%v: token %v, %v", args, cfg, err)
		}
	}

	cfg, err = loadConfig(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := node.NewConfig()
	if cfg.Listen != ":7400" || cfg.StateDir != node.DefaultStateDir() || cfg.Node.Name != def.Node.Name ||
		cfg.Node.Address != "127.0.0.1" || cfg.Node.APIPort != 7400 ||
		cfg.Store.Dir.Path != filepath.Join(node.DefaultStateDir(), "store") || !cfg.API.Public ||
		fmt.Sprint(cfg.Platform.Domains) != "[apps.localhost]" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if want := map[bool]string{true: "/var/lib/scafo", false: "./scafo-state"}[os.Geteuid() == 0]; node.DefaultStateDir() != want {
		t.Fatalf("default state dir %q, want %q", node.DefaultStateDir(), want)
	}
}

// TestConfigErrors: a SCAFO_* variable naming no setting, an unknown flag and a config
// file that cannot be read are errors, never ignored.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args, environ []string
		want          string
	}{
		{nil, []string{"SCAFO_NODE_NAEM=vps-a"}, "SCAFO_NODE_NAEM in the environment: not a setting (did you mean SCAFO_NODE_NAME?)"},
		{nil, []string{"SCAFO_STORE_S3_BUKET=b"}, "SCAFO_STORE_S3_BUKET in the environment: not a setting (did you mean SCAFO_STORE_S3_BUCKET?)"},
		{[]string{"--node.naem=vps-a"}, nil, "unknown flag --node.naem (did you mean --node.name?)"},
		{[]string{"--configFile=/nonexistent/scafo.yaml"}, nil, "/nonexistent/scafo.yaml"},
		{nil, []string{"SCAFO_CONFIGFILE=/nonexistent/scafo.yaml"}, "/nonexistent/scafo.yaml"},
	} {
		_, err := loadConfig(t, tc.args, tc.environ)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: error %v, want one naming %s", tc.args, tc.environ, err, tc.want)
		}
	}
}

// TestConfigEveryAdvertisedFlagLoads: every setting --help lists (paerser's encoding of
// Config) is accepted as a flag with its default value.
func TestConfigEveryAdvertisedFlagLoads(t *testing.T) {
	flats, err := flag.Encode(node.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, f := range flats {
		if f.Default == "" {
			continue // a section, or an empty setting
		}
		args = append(args, "--"+f.Name+"="+f.Default)
	}
	if len(args) < 15 {
		t.Fatalf("only %d flags with defaults: %v", len(args), args)
	}
	cfg, err := loadConfig(t, args, nil)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if cfg.Ports.Min != 24000 || cfg.Traefik.PathGroupThreshold != 64 {
		t.Fatalf("defaults did not round-trip: %+v", cfg)
	}
}

// TestConfigShippedFileLoads: deploy/node/scafo-node.yaml, which lists every setting,
// loads through the chain (every key known, every value parsed), and leaves the store
// in the state dir.
func TestConfigShippedFileLoads(t *testing.T) {
	cfg, err := loadConfig(t, []string{"--configFile=../deploy/node/scafo-node.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen == "" || len(cfg.Platform.Domains) == 0 {
		t.Fatalf("loaded %+v", cfg)
	}
	// The store's path is not pinned: --stateDir moves it with the state (a second node
	// started with another state dir must not write into the first one's store).
	moved, err := loadConfig(t, []string{"--configFile=../deploy/node/scafo-node.yaml", "--stateDir=/elsewhere"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Store.Dir.Path != "/elsewhere/store" || moved.Store.String() != "dir:/elsewhere/store" {
		t.Errorf("with --stateDir=/elsewhere the shipped file's store is %s, want dir:/elsewhere/store", moved.Store)
	}
	// Nor does it pin an example node's identity: a packaged node started before its
	// operator set them takes its own machine's name (and 127.0.0.1), never "vps-a".
	if def := node.NewConfig(); cfg.Node.Name != def.Node.Name || cfg.Node.Address != def.Node.Address {
		t.Errorf("the shipped file sets node %q at %q; want the defaults %q at %q", cfg.Node.Name, cfg.Node.Address, def.Node.Name, def.Node.Address)
	}
	if p := cfg.Probe; p.FlapWindow != ptypes.Duration(time.Minute) || p.FlapUps != 3 || p.HoldDown != ptypes.Duration(10*time.Second) || p.HoldDownMax != ptypes.Duration(5*time.Minute) {
		t.Errorf("shipped flap damping settings %+v", p)
	}
}

// TestConfigProbeFlapDamping: the flap damping settings read from flags and the
// environment, and a bad one is refused naming it.
func TestConfigProbeFlapDamping(t *testing.T) {
	cfg, err := loadConfig(t, []string{"--probe.flapWindow=30s", "--probe.flapUps=4", "--probe.holdDown=2s"}, []string{"SCAFO_PROBE_HOLDDOWNMAX=1m"})
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Probe; p.FlapWindow != ptypes.Duration(30*time.Second) || p.FlapUps != 4 || p.HoldDown != ptypes.Duration(2*time.Second) || p.HoldDownMax != ptypes.Duration(time.Minute) {
		t.Errorf("loaded %+v", p)
	}
	if _, err := loadConfig(t, []string{"--probe.holdDown=10m"}, nil); err == nil || !strings.Contains(err.Error(), "probe.holdDownMax") {
		t.Errorf("holdDown above holdDownMax: %v", err)
	}
}

// TestConfigHealthCheckIntervalAutomaticUnlessSet: the default interval is 0, which the
// render sizes for the fleet; a set one, even the old 5s default, is passed as it is.
func TestConfigHealthCheckIntervalAutomaticUnlessSet(t *testing.T) {
	cfg, err := loadConfig(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := node.HealthCheckInterval(cfg.Traefik.HealthCheck.Interval); got != "" {
		t.Errorf("default interval renders as %q, want automatic (\"\")", got)
	}
	cfg, err = loadConfig(t, []string{"--traefik.healthCheck.interval=5s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := node.HealthCheckInterval(cfg.Traefik.HealthCheck.Interval); got != "5s" {
		t.Errorf("explicit 5s renders as %q", got)
	}
	cfg, err = loadConfig(t, []string{"--configFile=../deploy/node/scafo-node.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := node.HealthCheckInterval(cfg.Traefik.HealthCheck.Interval); got != "" {
		t.Errorf("the shipped config's interval renders as %q, want automatic", got)
	}
}

// TestConfigPlatformGroups: platform.groups reads as domain=group entries from a flag
// and from the environment (paerser lists: comma-separated), folds the domain, and
// refuses an entry without '=', a domain that is not a platform domain, a domain mapped
// twice and a malformed group, naming the entry.
func TestConfigPlatformGroups(t *testing.T) {
	cfg, err := loadConfig(t, []string{"--platform.domains=apps.example.com,EU1.example.com", "--platform.groups=eu1.example.com=eu-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Platform.DomainGroups(); len(m) != 1 || m["eu1.example.com"] != "eu-1" {
		t.Fatalf("flag: %v", m)
	}
	cfg, err = loadConfig(t, []string{"--platform.domains=a.example.com,b.example.com"},
		[]string{"SCAFO_PLATFORM_GROUPS=a.example.com=ga,b.example.com=gb"})
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Platform.DomainGroups(); len(m) != 2 || m["a.example.com"] != "ga" || m["b.example.com"] != "gb" {
		t.Fatalf("environment: %v", m)
	}
	for _, tc := range []struct{ groups, want string }{
		{"a.example.com", `platform.groups[0] "a.example.com": must be domain=group`},
		{"c.example.com=gc", `"c.example.com" is not one of platform.domains`},
		{"a.example.com=ga,a.example.com=gb", `platform.groups[1]`},
		{"a.example.com=G_A", `platform.groups[0]`},
		{"a.example.com=", `platform.groups[0]`},
	} {
		_, err := loadConfig(t, []string{"--platform.domains=a.example.com", "--platform.groups=" + tc.groups}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("platform.groups=%s: %v, want an error containing %q", tc.groups, err, tc.want)
		}
	}
}

// TestConfigIngressesSettingsAreChecked: the ingress-report settings load by their names
// and bad values are refused naming the setting.
func TestConfigIngressesSettingsAreChecked(t *testing.T) {
	cfg, err := loadConfig(t, []string{"--ingresses.lostAfter=30s", "--ingresses.maxTracked=10"}, []string{"SCAFO_INGRESSES_FORGETAFTER=2h"})
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.Ingresses.LostAfter) != 30*time.Second || time.Duration(cfg.Ingresses.ForgetAfter) != 2*time.Hour || cfg.Ingresses.MaxTracked != 10 {
		t.Errorf("loaded %+v", cfg.Ingresses)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ingresses.lostAfter=1s"}, "ingresses.lostAfter"},
		{[]string{"--ingresses.lostAfter=2h", "--ingresses.forgetAfter=1h"}, "ingresses.forgetAfter"},
		{[]string{"--ingresses.maxTracked=0"}, "ingresses.maxTracked"},
		{[]string{"--ingresses.maxTracked=100000"}, "ingresses.maxTracked"},
	} {
		if _, err := loadConfig(t, c.args, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %s", c.args, err, c.want)
		}
	}
}

// TestConfigACMELockLeaseIsBounded: an issuance lock's lease is at most 1h, the most
// /v1/storage grants: a lock expiring beyond twice that is taken over as corrupt
// (certstore), so a node configured with a longer lease would lose its locks to peers.
func TestConfigACMELockLeaseIsBounded(t *testing.T) {
	base := []string{"--acme.enabled", "--acme.caServer=https://127.0.0.1:14000/dir"}
	if _, err := loadConfig(t, append(base, "--acme.lockLease=1h"), nil); err != nil {
		t.Fatalf("acme.lockLease=1h: %v", err)
	}
	for _, v := range []string{"0s", "500ms", "61m", "3h"} {
		if _, err := loadConfig(t, append(base, "--acme.lockLease="+v), nil); err == nil || !strings.Contains(err.Error(), "acme.lockLease") {
			t.Errorf("acme.lockLease=%s: err %v, want one naming acme.lockLease", v, err)
		}
	}
}

// TestConfigACMECustomBudgetIsBounded: acme.customBudget defaults to 50, accepts 0 to
// 10000, and anything else is refused naming the field.
func TestConfigACMECustomBudgetIsBounded(t *testing.T) {
	base := []string{"--acme.enabled", "--acme.caServer=https://127.0.0.1:14000/dir"}
	cfg, err := loadConfig(t, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ACME.CustomBudget != 50 {
		t.Fatalf("default acme.customBudget %d, want 50", cfg.ACME.CustomBudget)
	}
	for _, v := range []string{"0", "10000"} {
		if _, err := loadConfig(t, append(base, "--acme.customBudget="+v), nil); err != nil {
			t.Errorf("acme.customBudget=%s: %v", v, err)
		}
	}
	for _, v := range []string{"-1", "10001"} {
		if _, err := loadConfig(t, append(base, "--acme.customBudget="+v), nil); err == nil || !strings.Contains(err.Error(), "acme.customBudget") {
			t.Errorf("acme.customBudget=%s: err %v, want one naming acme.customBudget", v, err)
		}
	}
}
