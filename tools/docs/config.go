// Package docs generates the parts of docs/ that are read from the code, and its
// tests hold the documentation to the code: docs/configuration.md is ConfigurationMarkdown
// byte for byte (go test ./tools/docs -run Configuration -update rewrites it), and
// every design reference in a Go comment names a heading of docs/design.md.
package docs

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/traefik/paerser/env"
	"github.com/traefik/paerser/flag"
	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/settings"
	"github.com/scafo/ingress/node"
)

// Setting is one leaf of node.Config: a file key, a flag and an environment variable.
type Setting struct {
	Path        string // the file key, as the json tag spells it: "node.apiPort"
	Section     string // the first component ("" for the top-level settings)
	Flag        string // "--node.apiPort" (paerser matches flags case-insensitively)
	Env         string // "SCAFO_NODE_APIPORT"
	Default     string // as documented (dynamicDefaults for those computed at start)
	Description string // the field's description tag
	Secret      bool   // loggable:"false": never logged
	Type        string // duration, list, bool, integer, number, string
}

// dynamicDefaults are the defaults computed where the node starts (its user, its host
// name) or derived from another setting by Validate: NewConfig's value would be this
// machine's, so the reference says how each is computed.
var dynamicDefaults = map[string]string{
	"stateDir":       "`/var/lib/scafo` as root, else `./scafo-state`",
	"node.name":      "the host name's first label, lowercased (`node` when that is not a DNS label)",
	"node.apiPort":   "the `listen` port",
	"store.dir.path": "`<stateDir>/store`",
	"ingress.token":  "minted to `<stateDir>/ingress-token` (32 random bytes, hex, mode 0600, reused on restart)",
	"admin.token":    "minted to `<stateDir>/admin-token` (likewise)",
	"readonly.token": "minted to `<stateDir>/readonly-token` (likewise)",
}

// notes are what the reference says of a setting beyond its description: the bounds
// Validate enforces, and where the behaviour is explained. Every key must be a setting
// (the generator fails otherwise).
var notes = map[string]string{
	"configFile":                    "No search path: no file named, none read.",
	"listen":                        "",
	"stateDir":                      "One node per state dir: a node holds `<stateDir>/lock` (flock) while it runs, and one started on a state dir a live node holds is refused, naming that node's pid.",
	"node.name":                     "Two live nodes with one name: refused at start, reported while running ([operating.md](operating.md#one-name-one-node)).",
	"node.address":                  "An IP address; instances are published, dialled and probed at `node.address:port`.",
	"node.apiPort":                  "Must lie outside `ports.min..ports.max`.",
	"ingress.token":                 "At least 16 characters when set; never one of the admin's or read-only tokens. Flag alias: `--ingress-token`. See [security.md](security.md#tokens).",
	"ingress.previous":              "Each at least 16 characters, none of them one of the admin's or read-only tokens ([operating.md](operating.md#rotating-the-ingress-and-admin-tokens)).",
	"admin.previous":                "Each at least 16 characters, none of them one of the ingress's or read-only tokens.",
	"readonly.token":                "At least 16 characters when set; never one of the ingress's or admin's tokens. The status page's token: it reads and changes nothing ([security.md](security.md#who-can-do-what)).",
	"readonly.previous":             "Each at least 16 characters, none of them one of the ingress's or admin's tokens.",
	"platform.domains":              "At least one; ASCII case is folded, then each must be a canonical host name.",
	"platform.groups":               "A list rather than a map: a paerser map key cannot hold a domain's dots. Each domain one of `platform.domains`, at most once ([fleet.md](fleet.md#ingress-groups)). Every node must run with the same map.",
	"store.s3.endpoint":             "S3 when set, else the directory store. Any other `store.s3` setting without it is refused (the node would run on its directory store).",
	"traefik.entryPoints":           "At least one.",
	"admin.token":                   "At least 16 characters when set; never one of the ingress's or read-only tokens.",
	"log.format":                    "Anything else is refused.",
	"store.s3.bucket":               "Required with `store.s3.endpoint`.",
	"traefik.certResolver":          "See [certificates.md](certificates.md#the-platform-apexs-certificate).",
	"traefik.platformWildcardCerts": "Needs a resolver with `dnsChallenge` ([certificates.md](certificates.md#the-platform-apexs-certificate)).",
	"traefik.healthCheck.interval":  "Automatic: `max(5s, ⌈checked leaves / 200⌉ s)` ([performance.md](performance.md#health-checks-sized-for-the-fleet)).",
	"traefik.middlewares":           "Each once; never in provider `http` (the fleet's own). Only Traefik ingresses apply them ([traefik.md](traefik.md#middlewares)). A name removed here stays on the applications that list it: /v1/status warns.",
	"traefik.retry.attempts":        "At least 1. The defaults (12 tries from 200ms) wait 1.5 to 4.6 s in all, which carries a refused connection across a restart of about a second ([operating.md](operating.md#deploys-that-lose-nothing)).",
	"reconcile.nodeTTL":             "Must be longer than `reconcile.heartbeat` (4× is typical): live nodes flapping stale would reload every Traefik each time.",
	"reconcile.publishWindow":       "Not negative.",
	"ports.min":                     "`ports.min..ports.max` must be a valid range within 1..65535.",
	"ports.quarantine":              "At least 5 × `reconcile.interval` + 5s: refused below, never silently raised.",
	"probe.interval":                "See [operating.md](operating.md#instance-probes).",
	"probe.timeout":                 "At most `probe.interval`.",
	"probe.downAfter":               "At least 1, like `probe.upAfter`.",
	"probe.concurrency":             "2 to 1024.",
	"probe.flapUps":                 "At least 2.",
	"probe.holdDown":                "Positive, and at most `probe.holdDownMax`.",
	"writes.rate":                   "Per application token; the admin token is not limited. Positive, like `writes.burst`.",
	"audit.retention":               "At least 1h; records are kept in day segments, swept daily.",
	"limits.maxConns":               "Files the process already holds at start are counted out of the open-file limit ([security.md](security.md#hostile-clients)).",
	"ingresses.lostAfter":           "At least 2s ([traefik.md](traefik.md#ingress-reports-which-configuration-each-traefik-holds)).",
	"ingresses.forgetAfter":         "Longer than `ingresses.lostAfter`.",
	"acme.enabled":                  "Needs `api.public` ([certificates.md](certificates.md)).",
	"acme.caServer":                 "An `https://` URL.",
	"acme.renewalWindow":            "0, or in (0, 1).",
	"acme.customBudget":             "0 to 10000.",
	"acme.httpEntryPoints":          "At least one entry point name.",
	"acme.lockLease":                "1s to 1h.",
	"acme.delivery":                 "`inline` or `files` ([certificates.md](certificates.md#delivery)).",
	"log.level":                     "Anything else is refused.",
	"limits.reservedConns":          "",
	"traefik.pathGroupThreshold":    "See [design.md](design.md#routers).",
	"traefik.retry.initialInterval": "",
	"reconcile.fullInterval":        "The safety net: an object written around the API is read within it.",
	"ingresses.maxTracked":          "",
}

// Settings lists every leaf of node.Config in declaration order, checked against
// paerser's own flags and environment variables for the same struct: a setting this
// list names differently from what the node parses is an error.
func Settings() ([]Setting, error) {
	cfg := node.NewConfig()
	var out []Setting
	walk(reflect.ValueOf(cfg).Elem(), "", &out)

	// paerser's view of the same struct (flag and env names, lowercase or uppercase).
	flags, err := flag.Encode(node.NewConfig())
	if err != nil {
		return nil, fmt.Errorf("paerser flags: %w", err)
	}
	envs, err := env.Encode(node.EnvPrefix, node.NewConfig())
	if err != nil {
		return nil, fmt.Errorf("paerser environment: %w", err)
	}
	var want, gotFlags, wantEnv, gotEnv []string
	for _, f := range flags {
		want = append(want, strings.ToLower(f.Name))
	}
	for _, e := range envs {
		wantEnv = append(wantEnv, e.Name)
	}
	for _, s := range out {
		gotFlags = append(gotFlags, strings.ToLower(strings.TrimPrefix(s.Flag, "--")))
		gotEnv = append(gotEnv, s.Env)
	}
	// paerser lists each section too (--acme beside --acme.enabled): leaves only.
	want, wantEnv = leaves(want, "."), leaves(wantEnv, "_")
	slices.Sort(want)
	slices.Sort(gotFlags)
	slices.Sort(wantEnv)
	slices.Sort(gotEnv)
	if !slices.Equal(want, gotFlags) {
		return nil, fmt.Errorf("the json tags of node.Config name settings paerser does not parse as flags (%v), and paerser parses flags they do not name (%v)", minus(gotFlags, want), minus(want, gotFlags))
	}
	if !slices.Equal(wantEnv, gotEnv) {
		return nil, fmt.Errorf("the json tags of node.Config name variables paerser does not read (%v), and paerser reads variables they do not name (%v)", minus(gotEnv, wantEnv), minus(wantEnv, gotEnv))
	}
	known := map[string]bool{}
	for _, s := range out {
		known[s.Path] = true
	}
	for _, m := range []map[string]string{dynamicDefaults, notes} {
		for k := range m {
			if !known[k] {
				return nil, fmt.Errorf("tools/docs names setting %q, which node.Config does not have", k)
			}
		}
	}
	return out, nil
}

// minus is a without the elements of b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// leaves drops every name that is another's section (a prefix of it up to sep).
func leaves(names []string, sep string) []string {
	var out []string
	for _, n := range names {
		section := false
		for _, m := range names {
			if strings.HasPrefix(m, n+sep) {
				section = true
				break
			}
		}
		if !section {
			out = append(out, n)
		}
	}
	return out
}

var durationType = reflect.TypeOf(ptypes.Duration(0))

func walk(v reflect.Value, prefix string, out *[]Setting) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = strings.ToLower(f.Name[:1]) + f.Name[1:]
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		fv := v.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			walk(fv, path, out)
			continue
		}
		section, _, _ := strings.Cut(path, ".")
		if !strings.Contains(path, ".") {
			section = ""
		}
		s := Setting{
			Path:        path,
			Section:     section,
			Flag:        "--" + path,
			Env:         node.EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_")),
			Description: f.Tag.Get("description"),
			Secret:      f.Tag.Get("loggable") == "false",
		}
		s.Default, s.Type = formatDefault(fv)
		if d, ok := dynamicDefaults[path]; ok {
			s.Default = d
		}
		*out = append(*out, s)
	}
}

func formatDefault(v reflect.Value) (def, typ string) {
	if v.Type() == durationType {
		d := time.Duration(v.Int())
		if d == 0 {
			return "`0`", "duration"
		}
		return "`" + settings.FormatDuration(d) + "`", "duration"
	}
	switch v.Kind() {
	case reflect.Bool:
		return "`" + strconv.FormatBool(v.Bool()) + "`", "bool"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "`" + strconv.FormatInt(v.Int(), 10) + "`", "integer"
	case reflect.Float64, reflect.Float32:
		return "`" + strconv.FormatFloat(v.Float(), 'g', -1, 64) + "`", "number"
	case reflect.Slice:
		if v.Len() == 0 {
			return "none", "list"
		}
		var parts []string
		for i := 0; i < v.Len(); i++ {
			parts = append(parts, fmt.Sprint(v.Index(i).Interface()))
		}
		return "`" + strings.Join(parts, ",") + "`", "list"
	case reflect.String:
		if v.String() == "" {
			return "none", "string"
		}
		return "`" + v.String() + "`", "string"
	}
	return "`" + fmt.Sprint(v.Interface()) + "`", v.Kind().String()
}

// sections name the settings' first components in the order of node.Config, with a
// heading each; the description of the section's own field follows it.
func sectionDescriptions() map[string]string {
	out := map[string]string{}
	t := reflect.TypeOf(node.Config{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			out[name] = f.Tag.Get("description")
		}
	}
	return out
}

// ConfigurationMarkdown is docs/configuration.md.
func ConfigurationMarkdown() ([]byte, error) {
	settings, err := Settings()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(configIntro)
	b.WriteString(configBounds())
	descs := sectionDescriptions()
	section := "-"
	for _, s := range settings {
		if s.Section != section {
			section = s.Section
			if section == "" {
				b.WriteString("\n## General\n\n")
			} else {
				fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", section, descs[section])
			}
			b.WriteString("| file key | flag | environment | default | what |\n|---|---|---|---|---|\n")
		}
		what := s.Description
		if s.Secret {
			what += " Secret: never logged; a control character in it (a newline, CR, tab, NUL, DEL, C1) is refused."
		}
		if n := notes[s.Path]; n != "" {
			what += " " + n
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | %s | %s |\n", s.Path, s.Flag, s.Env, s.Default, escapeCell(what))
	}
	b.WriteString(configOutro)
	return b.Bytes(), nil
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// configBounds is what the strict check refuses of a file before reading a setting
// (internal/settings/bounds.go), its numbers read from the code.
func configBounds() string {
	return fmt.Sprintf(`
A configuration file is bounded before any setting in it is read: one over %s bytes (%d KiB; the
commented file with every setting is under 10 KB) is refused unread, naming the file and
the bound, and so is one whose tables and lists nest more than %d deep (no setting is deeper
than 4; a TOML file is measured from its text before it is parsed, a YAML file on its node
tree before any value is made), or whose YAML aliases and merge keys stand for more than
%s values in all (a "billion laughs"). A setting or section written twice in one file,
in two spellings (`+"`listen`"+` and `+"`Listen`"+`), is refused rather than one of them read.
The first %d problems of the flags, the variables and the file are named, the others
counted (`+"`and 49 980 more`"+`).
`, spaced(settings.MaxFileBytes), settings.MaxFileBytes>>10, settings.MaxFileDepth, spaced(settings.MaxAliasValues), settings.MaxReported)
}

// spaced writes n with its thousands apart, as the checks' messages do: 262 144.
func spaced(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

const configIntro = `# Configuration

<!-- Generated by tools/docs from node.Config (node/config.go, node/config_acme.go):
do not edit. go test ./tools/docs -run Configuration -update rewrites it; the test
fails when this page and the code differ. -->

The node is configured with [paerser](https://github.com/traefik/paerser), the way
Traefik is: a YAML or TOML file (` + "`--configFile`" + `), environment variables (` + "`SCAFO_`" + ` +
the path in capitals, ` + "`.`" + ` as ` + "`_`" + `), and flags (` + "`--`" + ` + the path; paerser matches
flags and file keys without regard to case). Unlike Traefik, the sources are layered:
defaults < file < environment < flags, field by field, so a secret can come from the
environment while the rest is in the file (one paerser resource-loader chain,
` + "`node.Loaders`" + `, in which no source stops the others). Every flag, ` + "`SCAFO_*`" + ` variable and
file key must name a setting: an unknown one stops the node, naming it, its source and the
closest setting (` + "`stores in /etc/scafo/scafo-node.yaml: unknown key (did you mean store?)`" + `,
` + "`unknown flag --listne (did you mean --listen?)`" + `), and so does a value that does not parse
(` + "`--probe.interval: invalid duration \"fast\"`" + `, ` + "`SCAFO_API_PUBLIC: \"yes\" is not a boolean`" + `). The
variables of the project's other programs are not settings and are left alone: ` + "`SCAFO_URL`" + `
and ` + "`SCAFO_TOKEN`" + ` (the command-line verbs), ` + "`SCAFO_INGRESS_NAME`" + ` (the Traefik integration),
` + "`SCAFO_ENDPOINTS`" + ` (the Caddy module), and the test suite's ` + "`SCAFO_TEST_*`" + `, ` + "`SCAFO_E2E_*`" + `,
` + "`SCAFO_BENCH*`" + `. A list is
comma-separated in a flag or a variable (` + "`--platform.domains=a.example,b.example`" + `) and a
sequence in the file (an empty one is refused where the default is not empty: paerser would
keep the default). A duration is Go's (` + "`250ms`" + `, ` + "`2s`" + `, ` + "`1h`" + `); a bare number is seconds.
` + "`scafo-node --help`" + ` lists the same flags, each with its default as written here and its
variable; ` + "`deploy/node/scafo-node.yaml`" + ` is a commented file
with every section.

With no configuration at all the node runs on one machine: it listens on ` + "`:7400`" + `, keeps
its state and a directory store in the state dir, serves ` + "`apps.localhost`" + `, and mints its
tokens. The file key is the path below; in YAML, each component is one level:

` + "```yaml" + `
node:
  name: vps-a
  address: 10.83.0.1
platform:
  domains: [apps.example.com]
store:
  s3:
    endpoint: s3.eu-west-1.amazonaws.com
    bucket: scafo
` + "```" + `

Every check below is made at start, and every error names the setting and where its value
came from (` + "`probe.interval 5ms: at least 10ms (0 disables probing) (from SCAFO_PROBE_INTERVAL in the environment)`" + `;
a setting no source set is said to be the default); a node with a bad setting does not start.
`

const configOutro = `
## Checked across settings

- ` + "`reconcile.nodeTTL`" + ` must exceed ` + "`reconcile.heartbeat`" + `, and ` + "`ports.quarantine`" + ` must be at least
  5 × ` + "`reconcile.interval`" + ` + 5s (a released port must outlive every ingress's copy of
  the old document).
- ` + "`node.apiPort`" + ` (the listen port by default) must lie outside ` + "`ports.min..ports.max`" + `: an
  application could otherwise be given the API's port.
- ` + "`acme.enabled`" + ` needs ` + "`api.public`" + `: the challenge router points at the document's node
  API chain.
- No token is accepted for both roles: ` + "`admin.token`" + ` and ` + "`admin.previous`" + ` share none with
  ` + "`ingress.token`" + ` and ` + "`ingress.previous`" + `, the token files under ` + "`stateDir`" + ` included (checked
  when the node reads them). See [security.md](security.md#tokens).
- ` + "`probe.*`" + ` beyond ` + "`probe.interval`" + ` are not checked while probing is off (` + "`probe.interval=0`" + `),
  nor ` + "`probe.flapUps`" + ` and the hold-downs while damping is off (` + "`probe.flapWindow=0`" + `).
`
