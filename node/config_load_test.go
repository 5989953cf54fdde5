package node_test

// The root's configuration: its sources (file, environment, flags, layered), the strict
// reading of each, the sources named in every error, the defaults and the derived
// values, and the checks that span sections. A section's own values and checks are
// tested in its package (settingstest: probe, reconcile, acme, writes, ports, audit,
// store); the sections of packages this file may not reach into (traefik: node/publish,
// ingresses: node/ingress) and the root's own (node, platform, tokens, log) are rows here.

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/traefik/paerser/cli"
	"github.com/traefik/paerser/flag"
	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/render"
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

// loadCase is one row of TestTheNodeConfigurationLoadsOrIsRefusedNamingTheSettingAndItsSource.
type loadCase struct {
	name          string
	args, environ []string
	// file is "name.ext:content" (the extension picks YAML or TOML), written to a temp
	// dir. <file> in args, environ, want and not stands for its path; named by nothing
	// else, it is given as --configFile.
	file      string
	want, not []string                    // refused: the error says each of want and none of not
	check     func(c *node.Config) string // accepted: what is wrong with the configuration ("" nothing)
}

func (tc loadCase) run(t *testing.T) {
	t.Helper()
	path := ""
	args, environ := slices.Clone(tc.args), slices.Clone(tc.environ)
	if tc.file != "" {
		name, content, _ := strings.Cut(tc.file, ":")
		path = filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		named := false
		for _, l := range [][]string{args, environ} {
			for i := range l {
				named = named || strings.Contains(l[i], "<file>")
				l[i] = strings.ReplaceAll(l[i], "<file>", path)
			}
		}
		if !named {
			args = append([]string{"--configFile=" + path}, args...)
		}
	}
	cfg, err := loadConfig(t, args, environ)
	if len(tc.want) == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if tc.check != nil {
			if bad := tc.check(cfg); bad != "" {
				t.Fatal(bad)
			}
		}
		return
	}
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range tc.want {
		if w = strings.ReplaceAll(w, "<file>", path); !strings.Contains(err.Error(), w) {
			t.Errorf("%v\ndoes not say %q", err, w)
		}
	}
	for _, w := range tc.not {
		if w = strings.ReplaceAll(w, "<file>", path); strings.Contains(err.Error(), w) {
			t.Errorf("%v\nsays %q", err, w)
		}
	}
}

// TestTheNodeConfigurationLoadsOrIsRefusedNamingTheSettingAndItsSource: the node's
// configuration from its three sources, each overriding the last field by field
// (defaults < file < environment < flags); every mistake stops the node with an error
// naming the setting, where its value came from and, for a misspelt name, the closest
// setting (issue 35's table); values that parse but mean nothing a fleet wants are
// refused (issue 39 items 6 and 7); a secret is never repeated.
func TestTheNodeConfigurationLoadsOrIsRefusedNamingTheSettingAndItsSource(t *testing.T) {
	const (
		tok    = "0123456789abcdef0123"
		secret = "c2NhZm8tdGVzdC10c2lnLXNlY3JldC0zMi1ieXRlcyE=" // a TSIG secret
	)
	def := node.NewConfig()
	flats, err := flag.Encode(node.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	var every []string // every setting --help lists, with its default
	for _, f := range flats {
		if f.Default != "" { // "": a section, or an empty setting
			every = append(every, "--"+f.Name+"="+f.Default)
		}
	}
	if len(every) < 15 {
		t.Fatalf("only %d flags with defaults: %v", len(every), every)
	}
	acme := []string{"--acme.enabled", "--acme.caServer=https://127.0.0.1:14000/dir", "--platform.domains=apps.example.com",
		"--acme.dns01.rfc2136.server=127.0.0.1:5353", "--acme.dns01.rfc2136.zones=example.com", "--acme.dns01.rfc2136.keyName=scafo-acme"}
	dns01 := func(extra ...string) []string { return append(slices.Clone(acme), extra...) }
	envSecret := []string{"SCAFO_ACME_DNS01_RFC2136_TSIGSECRET=" + secret}
	tsigFile := "tsig.secret:" + secret + "\n"
	healthInterval := func(want string) func(c *node.Config) string {
		return func(c *node.Config) string {
			if got := node.HealthCheckInterval(c.Traefik.HealthCheck.Interval); got != want {
				return fmt.Sprintf("traefik.healthCheck.interval renders as %q, want %q (\"\": sized for the fleet)", got, want)
			}
			return ""
		}
	}
	retry := func(want node.RetryConfig) func(c *node.Config) string {
		return func(c *node.Config) string {
			if c.Traefik.Retry != want {
				return fmt.Sprintf("traefik.retry %+v, want %+v", c.Traefik.Retry, want)
			}
			return ""
		}
	}
	groups := func(want map[string]string) func(c *node.Config) string {
		return func(c *node.Config) string {
			if m := c.Platform.DomainGroups(); fmt.Sprint(m) != fmt.Sprint(want) {
				return fmt.Sprintf("platform.groups %v, want %v", m, want)
			}
			return ""
		}
	}
	ingressToken := func(c *node.Config) string {
		if c.Ingress.Token != tok {
			return fmt.Sprintf("ingress.token %q, want %q", c.Ingress.Token, tok)
		}
		return ""
	}
	cases := []loadCase{
		// The sources, layered.
		{name: "file < environment < flags",
			file:    "scafo.yaml:listen: \":7500\"\nplatform:\n  domains: [\"apps.example.com\"]\nnode:\n  name: from-file\n",
			args:    []string{"--node.name=from-flag", "--ingress-token=tok-0123456789abcdef"},
			environ: []string{"SCAFO_ADMIN_TOKEN=adm-0123456789abcdef", "SCAFO_STATEDIR=/tmp/x"},
			check: func(c *node.Config) string {
				got := fmt.Sprintf("%s %s %v %s %s %s %d", c.Listen, c.Node.Name, c.Platform.Domains, c.Ingress.Token, c.Admin.Token, c.StateDir, c.Node.APIPort)
				if want := ":7500 from-flag [apps.example.com] tok-0123456789abcdef adm-0123456789abcdef /tmp/x 7500"; got != want {
					return fmt.Sprintf("got %q, want %q", got, want)
				}
				return ""
			}},
		{name: "a TOML file named in the environment, the environment over it, a flag over both",
			file:    "scafo.toml:listen = \"127.0.0.1:7600\"\n[node]\nname = \"from-file\"\naddress = \"10.0.0.1\"\n",
			args:    []string{"--node.address=10.0.0.3"},
			environ: []string{"SCAFO_CONFIGFILE=<file>", "SCAFO_NODE_NAME=from-env", "SCAFO_NODE_ADDRESS=10.0.0.2"},
			check: func(c *node.Config) string {
				if got := c.Listen + " " + c.Node.Name + " " + c.Node.Address; got != "127.0.0.1:7600 from-env 10.0.0.3" {
					return fmt.Sprintf("layering: got %q", got)
				}
				return ""
			}},
		{name: "the alias, --ingress-token v", args: []string{"--ingress-token", tok}, environ: []string{"SCAFO_INGRESS_TOKEN=env-0123456789abcdef"}, check: ingressToken},
		{name: "the alias, -ingress-token=v", args: []string{"-ingress-token=" + tok}, environ: []string{"SCAFO_INGRESS_TOKEN=env-0123456789abcdef"}, check: ingressToken},
		{name: "the alias, --ingress-token=v", args: []string{"--ingress-token=" + tok}, environ: []string{"SCAFO_INGRESS_TOKEN=env-0123456789abcdef"}, check: ingressToken},
		{name: "the path, --ingress.token=v", args: []string{"--ingress.token=" + tok}, environ: []string{"SCAFO_INGRESS_TOKEN=env-0123456789abcdef"}, check: ingressToken},
		{name: "the defaults and what derives from them", check: func(c *node.Config) string {
			if c.Listen != ":7400" || c.StateDir != node.DefaultStateDir() || c.Node.Name != def.Node.Name ||
				c.Node.Address != "127.0.0.1" || c.Node.APIPort != 7400 ||
				c.Store.Dir.Path != filepath.Join(node.DefaultStateDir(), "store") || !c.API.Public ||
				fmt.Sprint(c.Platform.Domains) != "[apps.localhost]" {
				return fmt.Sprintf("defaults: %+v", c)
			}
			if want := map[bool]string{true: "/var/lib/scafo", false: "./scafo-state"}[os.Geteuid() == 0]; node.DefaultStateDir() != want {
				return fmt.Sprintf("default state dir %q, want %q", node.DefaultStateDir(), want)
			}
			return healthInterval("")(c)
		}},
		{name: "every advertised flag with its default", args: every, check: func(c *node.Config) string {
			if c.Ports.Min != 24000 || c.Traefik.PathGroupThreshold != 64 {
				return fmt.Sprintf("defaults did not round-trip: %+v", c)
			}
			return ""
		}},
		{name: "the shipped file, which lists every setting", args: []string{"--configFile=../deploy/node/scafo-node.yaml"}, check: func(c *node.Config) string {
			if c.Listen == "" || len(c.Platform.Domains) == 0 {
				return fmt.Sprintf("loaded %+v", c)
			}
			// It pins no example node's identity: a packaged node started before its
			// operator set them takes its own machine's name (and 127.0.0.1), never "vps-a".
			if c.Node.Name != def.Node.Name || c.Node.Address != def.Node.Address {
				return fmt.Sprintf("the shipped file sets node %q at %q; want the defaults %q at %q", c.Node.Name, c.Node.Address, def.Node.Name, def.Node.Address)
			}
			if p := c.Probe; p.FlapWindow != ptypes.Duration(time.Minute) || p.FlapUps != 3 || p.HoldDown != ptypes.Duration(10*time.Second) || p.HoldDownMax != ptypes.Duration(5*time.Minute) {
				return fmt.Sprintf("shipped flap damping settings %+v", p)
			}
			return healthInterval("")(c)
		}},
		// The store's path is not pinned: --stateDir moves it with the state (a second
		// node started with another state dir must not write into the first one's store).
		{name: "the shipped file's store moves with --stateDir", args: []string{"--configFile=../deploy/node/scafo-node.yaml", "--stateDir=/elsewhere"},
			check: func(c *node.Config) string {
				if c.Store.Dir.Path != "/elsewhere/store" || c.Store.String() != "dir:/elsewhere/store" {
					return fmt.Sprintf("with --stateDir=/elsewhere the shipped file's store is %s, want dir:/elsewhere/store", c.Store)
				}
				return ""
			}},
		// What the reference allows: key spellings in any case (paerser's matching), the
		// flag alias, the variables of the project's other programs, bools and durations
		// in the forms paerser reads, and empty S3 settings beside no endpoint.
		{name: "what the reference allows",
			file: "scafo-node.yaml:LISTEN: \":7500\"\nprobe:\n  Interval: 2\nstore:\n  s3:\n    endpoint: \"\"\n    bucket: \"\"\n    insecure: false\napi:\n  public: false\n",
			args: []string{"--ingress-token", "0123456789abcdef", "--api.public", "--reconcile.interval=1"},
			environ: []string{"SCAFO_STATEDIR=/tmp/scafo-accepts", "SCAFO_URL=http://x", "SCAFO_TOKEN=t", "SCAFO_INGRESS_NAME=edge", "SCAFO_ENDPOINTS=a",
				"SCAFO_TEST_S3_ENDPOINT=x", "SCAFO_BENCH=1", "SCAFO_E2E_REPORT=x", "SCAFO_LOG_LEVEL=DEBUG"},
			check: func(c *node.Config) string {
				if c.Listen != ":7500" || c.Probe.Interval.String() != "2s" || !c.API.Public || c.Ingress.Token != "0123456789abcdef" ||
					c.Store.String() != "dir:/tmp/scafo-accepts/store" {
					return fmt.Sprintf("loaded %+v", c)
				}
				return ""
			}},

		// Names that are no setting, and sources that cannot be read: one row a source here,
		// the checks themselves internal/settings's (TestKnownFlags, TestKnownFile, TestKnownEnv).
		{name: "a variable naming no setting", environ: []string{"SCAFO_NODE_NAEM=vps-a"}, want: []string{"SCAFO_NODE_NAEM in the environment: not a setting (did you mean SCAFO_NODE_NAME?)"}},
		{name: "an unknown flag", args: []string{"--node.naem=vps-a"}, want: []string{"unknown flag --node.naem (did you mean --node.name?)"}},
		{name: "--listne with its value apart", args: []string{"--listne", ":7401"}, want: []string{"unknown flag --listne (did you mean --listen?)"}, not: []string{`":7401"`}},
		{name: "a file that cannot be read", args: []string{"--configFile=/nonexistent/scafo.yaml"}, want: []string{"/nonexistent/scafo.yaml"}},
		{name: "a file named in the environment that cannot be read", environ: []string{"SCAFO_CONFIGFILE=/nonexistent/scafo.yaml"}, want: []string{"/nonexistent/scafo.yaml"}},
		{name: "stores: in the file", file: "scafo-node.yaml:stores:\n  dir:\n    path: /x\n", want: []string{"stores in ", "scafo-node.yaml: unknown key (did you mean store?)"}},
		{name: "every mistake at once", args: []string{"--listne=:1"}, environ: []string{"SCAFO_LISTN=:2"}, file: "scafo-node.yaml:logg: {}\n",
			want: []string{"--listne", "SCAFO_LISTN", "logg in"}},

		// Values that do not parse (each kind: internal/settings's TestKnownFlags, TestKnownFile).
		{name: "--probe.interval=fast", args: []string{"--probe.interval=fast"}, want: []string{`--probe.interval: invalid duration "fast"`}},
		{name: "an empty traefik.entryPoints in the file", file: "scafo-node.yaml:traefik:\n  entryPoints: []\n", want: []string{"traefik.entryPoints in ", "an empty list is not read"}},

		// A check's error names the source of each setting it names: a later source
		// itself, not the one it overrode; the default included (each source alone, a
		// list's item: internal/settings's TestChainTellsFinishWhereEachSettingCameFrom,
		// TestExplainNamesTheSourceOfEverySettingNamed; probe's own rows). (Before,
		// SCAFO_PROBE_INTERVAL=5ms was refused as "probe.interval 5ms: …" alone.)
		{name: "a check's error, a flag over the variable", file: "scafo.yaml:node:\n  name: vps-a\nprobe:\n  interval: 7ms\n",
			args: []string{"--probe.interval=3ms"}, environ: []string{"SCAFO_PROBE_INTERVAL=5ms"},
			want: []string{"probe.interval 3ms", "(from flag --probe.interval)"}, not: []string{"SCAFO_PROBE_INTERVAL"}},
		{name: "a check's error, several settings, one of them the default", args: []string{"--node.name=vps-a", "--node.apiPort=25000"},
			want: []string{"node.apiPort 25000", "node.apiPort from flag --node.apiPort", "ports.min not set, the default", "ports.max not set, the default"}},

		// The root's sections: node, platform, tokens, log, listen.
		{name: "a node name that is no label", args: []string{"--node.name=Bad_Name"}, want: []string{"node.name", "from flag --node.name"}},
		{name: "a node address that is no IP", args: []string{"--node.address=not-an-ip"}, want: []string{`node.address "not-an-ip": must be an IP address`}},
		{name: "the unspecified address", args: []string{"--node.address=0.0.0.0"}, want: []string{`node.address "0.0.0.0": the unspecified address`}},
		{name: "the unspecified IPv6 address", args: []string{"--node.address=::"}, want: []string{`node.address "::": the unspecified address`}},
		{name: "a platform domain that is no host", args: []string{"--platform.domains=apps..example"}, want: []string{"platform.domains"}},
		{name: "a public suffix", args: []string{"--platform.domains=co.uk"}, want: []string{`platform.domains[0] "co.uk": a public suffix`}},
		{name: "a private public suffix", args: []string{"--platform.domains=github.io"}, want: []string{`platform.domains[0] "github.io": a public suffix`}},
		{name: "a domain under a public suffix", args: []string{"--platform.domains=apps.co.uk"}},
		{name: "nested platform domains", args: []string{"--platform.domains=example.com,apps.example.com"},
			want: []string{`platform.domains[1] "apps.example.com": under platform.domains[0] "example.com": an application named "apps" would take its apex`}},
		{name: "sibling platform domains", args: []string{"--platform.domains=apps.example.com,eu1.example.com"}},
		{name: "apps.localhost", args: []string{"--platform.domains=apps.localhost"}},
		{name: "platform.groups from a flag, folded", args: []string{"--platform.domains=apps.example.com,EU1.example.com", "--platform.groups=eu1.example.com=eu-1"},
			check: groups(map[string]string{"eu1.example.com": "eu-1"})},
		{name: "platform.groups from a variable", args: []string{"--platform.domains=a.example.com,b.example.com"},
			environ: []string{"SCAFO_PLATFORM_GROUPS=a.example.com=ga,b.example.com=gb"}, check: groups(map[string]string{"a.example.com": "ga", "b.example.com": "gb"})},
		{name: "platform.groups without =", args: []string{"--platform.domains=a.example.com", "--platform.groups=a.example.com"},
			want: []string{`platform.groups[0] "a.example.com": must be domain=group`}},
		{name: "platform.groups of another domain", args: []string{"--platform.domains=a.example.com", "--platform.groups=c.example.com=gc"},
			want: []string{`"c.example.com" is not one of platform.domains`}},
		{name: "platform.groups mapping a domain twice", args: []string{"--platform.domains=a.example.com", "--platform.groups=a.example.com=ga,a.example.com=gb"},
			want: []string{`platform.groups[1]`}},
		{name: "platform.groups with a malformed group", args: []string{"--platform.domains=a.example.com", "--platform.groups=a.example.com=G_A"}, want: []string{`platform.groups[0]`}},
		{name: "platform.groups with no group", args: []string{"--platform.domains=a.example.com", "--platform.groups=a.example.com="}, want: []string{`platform.groups[0]`}},
		{name: "log.level verbose", args: []string{"--log.level=verbose"}, want: []string{`log.level "verbose": one of debug, info, warn, error`}},
		{name: "log.format xml", args: []string{"--log.format=xml"}, want: []string{`log.format "xml": one of text, json`}},
		{name: "a short admin token", args: []string{"--admin.token=short"}, want: []string{"admin.token: a token of at least 16 characters"}},
		{name: "a short ingress token", environ: []string{"SCAFO_INGRESS_TOKEN=short"}, want: []string{"ingress.token: a token of at least 16 characters"}},
		// A token holding a control character (no HTTP header can carry it: a Traefik
		// given it could never poll) is refused naming its source, and never shown.
		{name: "a newline in a variable", environ: []string{"SCAFO_INGRESS_TOKEN=" + tok + "\nx"}, want: []string{"SCAFO_INGRESS_TOKEN: a control character (U+000A)"}, not: []string{tok}},
		{name: "a trailing CR in a variable", environ: []string{"SCAFO_ADMIN_TOKEN=" + tok + "\r"}, want: []string{"SCAFO_ADMIN_TOKEN: a control character (U+000D)"}, not: []string{tok}},
		{name: "a NUL in a previous list", environ: []string{"SCAFO_INGRESS_PREVIOUS=" + tok + "," + tok + "\x00"}, want: []string{"SCAFO_INGRESS_PREVIOUS: a control character (U+0000)"}, not: []string{tok}},
		{name: "a control character through the alias", args: []string{"--ingress-token", tok + "\x7f"}, want: []string{"--ingress.token: a control character (U+007F)"}, not: []string{tok}},
		{name: "an item of a file's list", file: "scafo.yaml:admin:\n  previous:\n    - " + tok + "\n    - \"" + tok + "\\e\"\n",
			want: []string{"admin.previous in <file>: item 1: a control character (U+001B)"}, not: []string{tok}},
		{name: "a control character in another secret", environ: []string{"SCAFO_STORE_S3_SECRETACCESSKEY=abc\ndef"},
			want: []string{"SCAFO_STORE_S3_SECRETACCESSKEY: a control character (U+000A)"}, not: []string{"abc"}},
		{name: "the node's port inside the instance range", args: []string{"--listen=127.0.0.1:24500", "--node.apiPort=7410"},
			want: []string{`listen "127.0.0.1:24500": port 24500 is inside ports.min..ports.max`}},
		{name: "the node's port outside the instance range", args: []string{"--listen=127.0.0.1:7410", "--node.apiPort=7410"}},
		{name: "the API port taken from listen inside the instance range", args: []string{"--listen=127.0.0.1:24000"}, want: []string{"node.apiPort"}},
		// limits (limits.go): loaded from flags and the environment, checked; the derived
		// connection cap is TestLimitsSettings's.
		{name: "limits from flags and variables", args: []string{"--limits.maxConns=100", "--limits.bodyTimeout=3s"},
			environ: []string{"SCAFO_LIMITS_RESERVEDCONNS=10", "SCAFO_LIMITS_IDLETIMEOUT=45s"}, check: func(c *node.Config) string {
				l := c.Limits
				if total, reserved := l.Conns(); l.MaxConns != 100 || l.ReservedConns != 10 || time.Duration(l.BodyTimeout) != 3*time.Second ||
					time.Duration(l.IdleTimeout) != 45*time.Second || time.Duration(l.HeaderTimeout) != 5*time.Second || total != 100 || reserved != 10 {
					return fmt.Sprintf("loaded %+v, conns %d/%d, want 100/10", l, total, reserved)
				}
				return ""
			}},
		{name: "limits.reservedConns not under maxConns", args: []string{"--limits.maxConns=10", "--limits.reservedConns=10"}, want: []string{"limits."}},
		{name: "a negative limits.maxConns", args: []string{"--limits.maxConns=-1"}, want: []string{"limits."}},
		{name: "limits.bodyTimeout 0", args: []string{"--limits.bodyTimeout=0s"}, want: []string{"limits."}},
		{name: "limits.rejectLog 0", args: []string{"--limits.rejectLog=0s"}, want: []string{"limits."}},
		// A removed setting is named as removed, not as unknown (in every source:
		// internal/settings's TestARemovedSettingIsNamedAsRemoved).
		{name: "limits.trustedProxies, a flag", args: []string{"--limits.trustedProxies=10.0.0.0/8"}, want: []string{"removed setting", "limits.trustedProxies"}, not: []string{"unknown", "not a setting"}},

		// Checks that span sections.
		{name: "ports.quarantine within 5 reconcile intervals", args: []string{"--ports.quarantine=1s"}, want: []string{"ports.quarantine 1s: must be at least 5 x reconcile.interval + 5s"}},
		// acme.dns01: the TSIG secret read from its file or the environment, checked
		// only when on; checks with other sections name both settings, never the secret.
		// The section's own refusals are fleetcerts's TestConfigACMEDNS01.
		{name: "dns01, the secret from its file", file: tsigFile, args: dns01("--acme.dns01.platform", "--acme.dns01.rfc2136.tsigSecretFile=<file>"),
			check: func(c *node.Config) string {
				if r := c.ACME.DNS01.RFC2136; r.TSIGSecret != secret || r.TSIGSecretFile != "" {
					return fmt.Sprintf("secret from the file: the loader left secret %q, file %q", r.TSIGSecret, r.TSIGSecretFile)
				}
				if p, err := c.ACME.DNS01.RFC2136.Provider(); err != nil || p.Secret != secret || p.Server != "127.0.0.1:5353" {
					return fmt.Sprintf("provider from the file: %v %v", p, err)
				}
				return ""
			}},
		{name: "dns01, the secret from the environment", args: dns01("--acme.dns01.delegationZone=acme.fleet.example"), environ: envSecret,
			check: func(c *node.Config) string {
				if p, err := c.ACME.DNS01.RFC2136.Provider(); err != nil || p.Secret != secret {
					return fmt.Sprintf("provider from the environment: %v %v", p, err)
				}
				return ""
			}},
		{name: "dns01 with the old flag", args: dns01("--acme.dns01.platform", "--traefik.platformWildcardCerts", "--traefik.certResolver=le"), environ: envSecret,
			want: []string{"traefik.platformWildcardCerts"}, not: []string{secret}},
		{name: "dns01 without the api apex", args: dns01("--acme.dns01.platform", "--api.public=false"), environ: envSecret,
			want: []string{"needs api.public"}, not: []string{secret}},

		// traefik.* (package publish's section).
		{name: "traefik.healthCheck.interval set, even to the old default", args: []string{"--traefik.healthCheck.interval=5s"}, check: healthInterval("5s")},
		{name: "traefik.healthCheck.interval 1s", args: []string{"--traefik.healthCheck.interval=1s"}, check: healthInterval("1s")},
		{name: "traefik.retry defaults to the render's",
			check: func(c *node.Config) string {
				want := node.RetryConfig{Attempts: render.DefaultRetryAttempts, InitialInterval: ptypes.Duration(200 * time.Millisecond)}
				if time.Duration(want.InitialInterval).String() != render.DefaultRetryInitialInterval {
					return fmt.Sprintf("the render's initial interval is %s", render.DefaultRetryInitialInterval)
				}
				return retry(want)(c)
			}},
		{name: "traefik.retry from flags", args: []string{"--traefik.retry.attempts=5", "--traefik.retry.initialInterval=1s"},
			check: retry(node.RetryConfig{Attempts: 5, InitialInterval: ptypes.Duration(time.Second)})},
		{name: "traefik.retry from the environment", environ: []string{"SCAFO_TRAEFIK_RETRY_ATTEMPTS=3", "SCAFO_TRAEFIK_RETRY_INITIALINTERVAL=300ms"},
			check: retry(node.RetryConfig{Attempts: 3, InitialInterval: ptypes.Duration(300 * time.Millisecond)})},
		{name: "traefik.retry off", args: []string{"--traefik.retry.attempts=1"}, check: retry(node.RetryConfig{Attempts: 1, InitialInterval: ptypes.Duration(200 * time.Millisecond)})},
		// traefik.middlewares: name@provider references, each once, never in the fleet's
		// own provider (http); kept in their order.
		{name: "a middleware in the file", file: "scafo.yaml:node:\n  name: vps-a\ntraefik:\n  middlewares: [\"auth@file\", \"basic\"]\n",
			want: []string{`traefik.middlewares[1] "basic": must be name@provider`, "(from traefik.middlewares in <file>)"}},
		{name: "a middleware twice in a variable", environ: []string{"SCAFO_TRAEFIK_MIDDLEWARES=auth@file,auth@file"},
			want: []string{`traefik.middlewares[1] "auth@file": declared twice (as traefik.middlewares[0])`, "(from SCAFO_TRAEFIK_MIDDLEWARES in the environment)"}},
		{name: "a middleware of the fleet's provider in a flag", args: []string{"--traefik.middlewares=scafo-retry@http"},
			want: []string{`traefik.middlewares[0] "scafo-retry@http": provider http is the fleet's own`, "(from flag --traefik.middlewares)"}},
		{name: "middlewares kept in their order", args: []string{"--traefik.middlewares=www-redirect@file,auth@file"}, check: func(c *node.Config) string {
			if want := []string{"www-redirect@file", "auth@file"}; !slices.Equal(c.Traefik.Middlewares, want) {
				return fmt.Sprintf("traefik.middlewares = %q, want %q", c.Traefik.Middlewares, want)
			}
			return ""
		}},

		// ingresses.* (package ingress's section).
		{name: "ingresses settings", args: []string{"--ingresses.lostAfter=30s", "--ingresses.maxTracked=10"}, environ: []string{"SCAFO_INGRESSES_FORGETAFTER=2h"},
			check: func(c *node.Config) string {
				if time.Duration(c.Ingresses.LostAfter) != 30*time.Second || time.Duration(c.Ingresses.ForgetAfter) != 2*time.Hour || c.Ingresses.MaxTracked != 10 {
					return fmt.Sprintf("loaded %+v", c.Ingresses)
				}
				return ""
			}},
		{name: "ingresses.lostAfter too short", args: []string{"--ingresses.lostAfter=1s"}, want: []string{"ingresses.lostAfter"}},
		{name: "ingresses.forgetAfter within lostAfter", args: []string{"--ingresses.lostAfter=2h", "--ingresses.forgetAfter=1h"}, want: []string{"ingresses.forgetAfter"}},
		{name: "ingresses.maxTracked 0", args: []string{"--ingresses.maxTracked=0"}, want: []string{"ingresses.maxTracked"}},
		{name: "ingresses.maxTracked too large", args: []string{"--ingresses.maxTracked=100000"}, want: []string{"ingresses.maxTracked"}},
	}
	for _, tc := range cases { // not parallel: loadConfig sets os.Args
		t.Run(tc.name, tc.run)
	}
}

// TestRetryBeyondTheRenderStopsTheNode: traefik.retry values the configuration accepts
// but the render's bounds refuse stop the node when it is built, naming the setting.
func TestRetryBeyondTheRenderStopsTheNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retry   node.RetryConfig
		wantErr string
	}{
		{"zero interval", node.RetryConfig{Attempts: 3}, "retry.initialInterval"},
		{"interval too long", node.RetryConfig{Attempts: 3, InitialInterval: ptypes.Duration(time.Minute)}, "retry.initialInterval"},
		{"too many attempts", node.RetryConfig{Attempts: render.MaxRetryAttempts + 1, InitialInterval: ptypes.Duration(time.Second)}, "retry.attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "vps-a", t.TempDir())
			cfg.Traefik.Retry = tc.retry
			st := openDir(t, cfg.Store.Dir.Path)
			_, err := node.NewWithStore(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), st, testIngressToken, testAdminToken)
			if err == nil || !strings.Contains(err.Error(), "traefik render options") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewWithStore: %v, want the render options refused naming %s", err, tc.wantErr)
			}
		})
	}
}

// TestConfigLoaderSurvivesHostileInput: whatever a configuration file, the environment
// or the flags hold, the loader answers with an error (or a configuration) in bounded
// CPU time: no panic, no unbounded work. YAML alias bombs, deep nesting in YAML and TOML,
// megabyte keys (each unknown key is compared with every setting for a suggestion:
// a megabyte flag or variable name took 46 s and 17 s, matrices of a megabyte's rows
// per setting, before Closest skipped names of another length), floods of unknown
// variables, and values at and past every numeric limit. Not held here, at sizes no
// configuration has: 65 536 platform domains take ~40 s (the nested-domain check is
// quadratic) and a TOML table 50 000 keys deep ~11 s (the TOML decoder).
func TestConfigLoaderSurvivesHostileInput(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var bomb strings.Builder
	bomb.WriteString("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n")
	for i := 'b'; i <= 'j'; i++ {
		prev := string(i - 1)
		bomb.WriteString(string(i) + ": &" + string(i) + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n")
	}
	bomb.WriteString("node:\n  name: *j\n")
	long := strings.Repeat("x", 1<<20)
	var flood []string
	for i := range 5000 {
		flood = append(flood, "SCAFO_FLOOD_"+strings.Repeat("Y", i%50)+"="+strings.Repeat("v", 100))
	}
	cases := []struct {
		name    string
		args    []string
		environ []string
	}{
		{"yaml alias bomb", []string{"--configFile=" + file("bomb.yaml", bomb.String())}, nil},
		{"yaml deep nesting", []string{"--configFile=" + file("deep.yaml", "node: "+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+"\n")}, nil},
		{"yaml deep maps", []string{"--configFile=" + file("deepmap.yaml", strings.Repeat("{a: ", 50000)+"1"+strings.Repeat("}", 50000)+"\n")}, nil},
		{"toml deep arrays", []string{"--configFile=" + file("deep.toml", "a = "+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+"\n")}, nil},
		{"toml deep tables", []string{"--configFile=" + file("deept.toml", "["+strings.Repeat("a.", 2000)+"b]\nc = 1\n")}, nil},
		{"megabyte unknown yaml key", []string{"--configFile=" + file("long.yaml", long+": 1\n")}, nil},
		{"megabyte unknown flag", []string{"--" + long + "=1"}, nil},
		{"megabyte unknown variable", nil, []string{"SCAFO_" + long + "=1"}},
		{"megabyte value", []string{"--node.name=" + long}, nil},
		{"megabyte list", []string{"--platform.domains=" + strings.Repeat("a.example.com,", 1<<12)}, nil},
		{"unknown variable flood", nil, flood},
		{"numbers past their limits", []string{"--ports.min=-9223372036854775809", "--ports.max=99999999999999999999999", "--writes.rate=1e400", "--writes.burst=-1",
			"--probe.interval=9999999999999h", "--reconcile.interval=-1s", "--limits.maxConns=-5", "--acme.platformBudget=1e9", "--probe.concurrency=0"}, nil},
		{"odd bytes", []string{"--node.name=\x00\xff", "--platform.domains=\u202e.example.com", "--log.level=\x00"}, []string{"SCAFO_\xff=1", "SCAFO_=1", "SCAFO_NODE_NAME"}},
	}
	// The bound is on CPU time, not the wall clock: the work the loader does, which a
	// busy machine does not stretch (the slowest case, the variable flood, takes about
	// 1 CPU-second under -race; the unbounded cases took 17 s and more). Not parallel:
	// the CPU time is the whole test process's, and Go runs no parallel test beside a
	// sequential one.
	for _, c := range cases {
		start, wall := cpuTime(), time.Now()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: the loader panicked: %v", c.name, p)
				}
			}()
			_, err := loadConfig(t, c.args, c.environ)
			if err == nil && c.name != "unknown variable flood" {
				t.Logf("%s: accepted", c.name)
			}
		}()
		if d := cpuTime() - start; d > 5*time.Second {
			t.Errorf("%s: the loader took %s of CPU time (%s on the clock)", c.name, d.Round(time.Millisecond), time.Since(wall).Round(time.Millisecond))
		} else {
			t.Logf("%s: %s of CPU time (%s on the clock)", c.name, d.Round(time.Millisecond), time.Since(wall).Round(time.Millisecond))
		}
	}
}

// TestLimitsSettings: the connection cap is derived from the open-file limit when not
// set. (Loading and checking the limits: rows of
// TestTheNodeConfigurationLoadsOrIsRefusedNamingTheSettingAndItsSource.)
func TestLimitsSettings(t *testing.T) {
	// Derived: 3/4 of what is left of the open-file limit (at most 4096), an eighth of
	// it reserved. The files held now may move by one or two while this runs.
	def := node.NewConfig().Limits
	derive := func() int {
		files := node.OpenFileLimit() - node.OpenFiles()
		return min(node.MaxDerivedConns, max(node.MinConns, files-max(64, files/4)))
	}
	lo := derive()
	total, reserved := def.Conns()
	hi := derive()
	if node.OpenFileLimit() > 0 && (total < min(lo, hi)-2 || total > max(lo, hi)+2) {
		t.Errorf("derived cap %d, want %d..%d (3/4 of the files left)", total, lo, hi)
	}
	if reserved != max(1, total/8) || reserved >= total {
		t.Errorf("derived reserve %d of %d", reserved, total)
	}
}
