package main

import (
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/proc"
	"github.com/scafo/ingress/internal/settings"
	"github.com/scafo/ingress/internal/testnode"
)

// helpPage is what `scafo-node ... --help` says.
type helpPage struct {
	text     string
	usage    string          // the first usage line
	commands []string        // the Commands section
	flags    map[string]bool // the Flags section, lowercase names
}

var (
	helpFlagRE  = regexp.MustCompile(`^\s+--([A-Za-z0-9.]+)\s+\(Default: `)
	helpCmdRE   = regexp.MustCompile(`^\s+([a-z]+)\s{2,}\S`)
	mentionRE   = regexp.MustCompile(`--([A-Za-z][A-Za-z0-9.-]*)`)
	positionRE  = regexp.MustCompile(`(^|\s)<[a-z]+>`)
	rootAliases = map[string]bool{"ingress-token": true, "version": true} // accepted: see node.TestTheNodeConfigurationLoadsOrIsRefusedNamingTheSettingAndItsSource
)

func readHelp(t *testing.T, bin string, path ...string) helpPage {
	t.Helper()
	out, err := exec.Command(bin, append(path, "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("scafo-node %v --help: %v\n%s", path, err, out)
	}
	p := helpPage{text: string(out), flags: map[string]bool{}}
	section := ""
	for line := range strings.SplitSeq(p.text, "\n") {
		switch {
		case strings.HasPrefix(line, "Usage: "):
			if p.usage == "" {
				p.usage = strings.TrimPrefix(line, "Usage: ")
			}
		case line == "Commands:" || line == "Flags:":
			section = line
		case section == "Commands:" && helpCmdRE.MatchString(line):
			p.commands = append(p.commands, helpCmdRE.FindStringSubmatch(line)[1])
		case section == "Flags:" && helpFlagRE.MatchString(line):
			p.flags[strings.ToLower(helpFlagRE.FindStringSubmatch(line)[1])] = true
		}
	}
	if want := "scafo-node " + strings.Join(path, " "); !strings.HasPrefix(p.usage+" ", strings.TrimSpace(want)+" ") {
		t.Errorf("scafo-node %v --help: usage %q does not start with %q", path, p.usage, want)
	}
	// Every flag the page mentions (usage line, descriptions) is one it lists.
	for _, m := range mentionRE.FindAllStringSubmatch(p.text, -1) {
		name := strings.ToLower(m[1])
		if !p.flags[name] && !(len(path) == 0 && rootAliases[name]) {
			t.Errorf("scafo-node %v --help mentions --%s but does not list it under Flags:\n%s", path, m[1], p.text)
		}
	}
	return p
}

// elsewhere are the verbs TestVerbHelpMatchesWhatItAccepts leaves to their own tests:
// store init and config check take the node's whole configuration (storeinit_test.go,
// socket_linux_test.go's TestConfigCheckSaysWhetherTheNodeWouldStart); front is the
// layer-4 front, a server of its own configuration (front_test.go, node/front, e2e).
var elsewhere = map[string]bool{"store init": true, "config check": true, "front": true}

// TestVerbHelpMatchesWhatItAccepts walks every verb through --help (the command tree
// is read from the help pages), then calls each one against a running node with every
// flag its help lists and the positional arguments its usage line names: each call
// succeeds, and every flag another verb lists but this one does not is refused.
func TestVerbHelpMatchesWhatItAccepts(t *testing.T) {
	bin := buildBinary(t)

	// The verbs, from the help pages.
	var leaves []string
	pages := map[string]helpPage{}
	var walk func(path []string)
	walk = func(path []string) {
		p := readHelp(t, bin, path...)
		if len(path) > 0 && len(p.commands) == 0 && !elsewhere[strings.Join(path, " ")] {
			leaves = append(leaves, strings.Join(path, " "))
			pages[strings.Join(path, " ")] = p
		}
		for _, c := range p.commands {
			walk(append(slices.Clone(path), c))
		}
	}
	walk(nil)

	// A running node, and the arguments each verb is called with, in call order.
	n := startTestNode(t)
	calls := []struct {
		verb string
		args []string
		want string // in the output
	}{
		{"apps put", []string{"shop"}, `"acme"`},
		{"apps get", []string{"shop"}, `"/healthz"`},
		{"apps list", nil, `"shop"`},
		{"domains claim", []string{"shop", "shop.example.org"}, "claimed by shop"},
		{"domains list", nil, `"shop.example.org"`},
		{"audit", nil, `"domain.claim"`},
		{"routes", nil, `"shop.example.org"`},
		{"ingresses", nil, `"ingresses"`},
		{"certs", nil, `"enabled": false`},
		{"domains paths", []string{"shop.example.org"}, `"shop.example.org"`},
		{"domains release", []string{"shop", "shop.example.org"}, "released by shop"},
		{"instances allocate", []string{"shop"}, `"app": "shop"`},
		{"instances move", []string{"shop"}, `"port": 17999`},
		{"instances release", []string{"shop"}, "released shop"},
		{"apps rm", []string{"shop"}, "deleted shop"},
		{"store adopt", nil, "store adopt requested"},
		{"version", nil, "scafo-node dev (commit "},
		{"help", nil, "Usage: scafo-node [flags]"},
	}
	var called []string
	for _, c := range calls {
		called = append(called, c.verb)
	}
	sort.Strings(called)
	sort.Strings(leaves)
	if !slices.Equal(called, leaves) {
		t.Fatalf("verbs in --help %v, verbs the test calls %v", leaves, called)
	}
	values := map[string]string{
		"url": n.url, "token": n.admin, "statedir": n.stateDir, "json": "",
		"account": "acme", "placement": "vps-a", "health": "/healthz", "wait": "10s",
		"port": "17999", "notready": "", "force": "", "norollback": "", "allownoingress": "", "replace": "",
		"app": "shop", "actor": "admin", "action": "domain.claim", "since": "1h", "limit": "10",
	}
	every := map[string]bool{}
	for _, p := range pages {
		for f := range p.flags {
			every[f] = true
		}
	}

	for _, c := range calls {
		p := pages[c.verb]
		if got := len(positionRE.FindAllString(p.usage, -1)); got != len(c.args) {
			t.Errorf("%s: usage %q names %d arguments, the test passes %d", c.verb, p.usage, got, len(c.args))
		}
		args := append(strings.Fields(c.verb), c.args...)
		for f := range p.flags {
			v, ok := values[f]
			if !ok {
				t.Fatalf("%s --help lists --%s: give the test a value for it", c.verb, f)
			}
			if v == "" {
				args = append(args, "--"+f)
			} else {
				args = append(args, "--"+f+"="+v)
			}
		}
		if c.verb == "routes" {
			n.instanceReady(t, "shop")
		}
		var out []byte
		var err error
		_ = proc.Poll(10*time.Second, 100*time.Millisecond, func() error {
			if out, err = runCLI(bin, args...); err == nil && !strings.Contains(string(out), c.want) {
				return errors.New("not yet")
			}
			return err
		})
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Fatalf("scafo-node %v: %v, want %q in\n%s", args, err, c.want, out)
		}

		// The flags of other verbs, refused in one call (settings.MaxReported at most);
		// help and version stop at the first, so a flag the call did not name is
		// tried alone.
		var foreign []string
		for f := range every {
			if !p.flags[f] {
				foreign = append(foreign, f)
			}
		}
		refused := func(flags ...string) (bool, string) {
			bad := append(strings.Fields(c.verb), c.args...)
			for _, f := range flags {
				bad = append(bad, "--"+f+"=x")
			}
			out, err := runCLI(bin, append(bad, "--url="+n.url, "--token="+n.admin)...)
			return err != nil, string(out)
		}
		for chunk := range slices.Chunk(foreign, settings.MaxReported) {
			ok, out := refused(chunk...)
			for _, f := range chunk {
				if !ok || !strings.Contains(out, "--"+f) {
					if ok, out := refused(f); !ok || !strings.Contains(out, f) {
						t.Errorf("scafo-node %s: --%s is not in its help, yet: %s", c.verb, f, out)
					}
				}
			}
		}
	}
}

// runCLI runs the binary with no SCAFO_* variables in its environment.
func runCLI(bin string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = envWithoutScafo()
	return cmd.CombinedOutput()
}

// envWithoutScafo is this process's environment without SCAFO_* variables: a test's
// node must never pick up the operator's store, state dir or tokens.
func envWithoutScafo() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SCAFO_") {
			env = append(env, kv)
		}
	}
	return env
}

// testNode is a node served in-process (internal/testnode: vps-a on 127.0.0.1, probes
// off), with its admin token in its state dir, where the CLI looks for it for calls
// without --token.
type testNode struct {
	url, admin, stateDir string
}

func startTestNode(t *testing.T) *testNode {
	t.Helper()
	tn := testnode.Start(t, testnode.Config(t, "vps-a", filepath.Join(t.TempDir(), "store")))
	n := &testNode{url: tn.URL, admin: testnode.AdminToken, stateDir: tn.Cfg.StateDir}
	if err := os.WriteFile(filepath.Join(n.stateDir, "admin-token"), []byte(n.admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// instanceReady reports app's instance on this node ready (nothing probes it).
func (n *testNode) instanceReady(t *testing.T, app string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, n.url+"/v1/node/instances/"+app, strings.NewReader(`{"port":25001,"ready":true}`))
	req.Header.Set("Authorization", "Bearer "+n.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT instance %s: %d %s", app, resp.StatusCode, body)
	}
}
