package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// preinstStubs are getent, groupadd and useradd over files in the stub directory
// (passwd, group: the machine's accounts), each call appended to calls: a preinst runs
// as dpkg runs it, without a machine.
var preinstStubs = map[string]string{
	"getent": `#!/bin/sh
f="$STUBS/$1"
if [ $# -eq 1 ]; then cat "$f"; exit 0; fi
grep "^$2:" "$f" || exit 2
`,
	"groupadd": `#!/bin/sh
echo "groupadd $*" >> "$STUBS/calls"
`,
	"useradd": `#!/bin/sh
echo "useradd $*" >> "$STUBS/calls"
`,
}

// runPreinst runs deploy/package/<pkg>/preinst with args over a machine whose
// /etc/passwd and /etc/group are passwd and group; it returns the script's output,
// its error, and the account tools it called.
func runPreinst(t *testing.T, pkg, passwd, group string, args ...string) (out string, err error, calls string) {
	t.Helper()
	stubs := t.TempDir()
	for name, body := range preinstStubs {
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"passwd": passwd, "group": group} {
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", append([]string{filepath.Join("..", "deploy", "package", pkg, "preinst")}, args...)...)
	cmd.Env = []string{"PATH=" + stubs + ":/usr/bin:/bin", "STUBS=" + stubs}
	b, err := cmd.CombinedOutput()
	c, _ := os.ReadFile(filepath.Join(stubs, "calls"))
	return string(b), err, string(c)
}

// TestThePreinstScriptsRefuseAGroupWithMembersOnAFreshInstall: a fresh install
// ("install" with no earlier version) over an existing system group of the service's
// name that has members other than the service's user (listed in the group, or users
// whose primary group it is) fails, naming the group and its members, and creates
// nothing: they would read what the service reads (/etc/scafo/scafo-node.yaml is
// root:scafo 0640). An upgrade, or an install over remaining configuration files (an
// earlier version given), keeps the group as it is; so does a fresh install over a
// group whose only member is the service's user. A user or group of the name that is not
// a system one (uid or gid 1000 or more: a person, a deploy account) is refused, naming
// it, whatever the install: the service would run as that account and its group read
// the configuration, as adduser --system refuses; a system user of the name is kept.
func TestThePreinstScriptsRefuseAGroupWithMembersOnAFreshInstall(t *testing.T) {
	const people = "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/bash\nbob:x:1001:1001::/home/bob:/bin/bash\n"
	for _, pkg := range []struct{ name, user string }{{"scafo-node", "scafo"}, {"scafo-caddy", "caddy"}} {
		u := pkg.user
		for _, tc := range []struct {
			name    string
			passwd  string
			group   string
			args    []string
			refused []string // what the refusal names; nil: accepted
			creates bool     // accepted and creates the group
		}{
			{"listed members, fresh install", people, u + ":x:998:alice,bob\n", []string{"install"},
				[]string{"group " + u, "alice,bob", "gpasswd -d"}, false},
			{"a member by primary group, fresh install", people + "carol:x:1002:998::/home/carol:/bin/bash\n", u + ":x:998:\n", []string{"install"},
				[]string{"group " + u, "carol"}, false},
			{"the service's user alone", people + u + ":x:997:998::/var/lib/" + u + ":/usr/sbin/nologin\n", u + ":x:998:" + u + "\n", []string{"install"},
				nil, false},
			{"listed members, upgrade", people + u + ":x:997:998::/var/lib/" + u + ":/usr/sbin/nologin\n", u + ":x:998:alice,bob\n", []string{"upgrade", "1.0.0"},
				nil, false},
			{"listed members, install over remaining configuration files", people, u + ":x:998:alice,bob\n", []string{"install", "1.0.0"},
				nil, false},
			{"no group, fresh install", people, "root:x:0:\n", []string{"install"}, nil, true},
			// Never a login account of the name: a user (uid 1000) or a group (gid
			// 1000), on an install or an upgrade, is refused naming it.
			{"a login user of the name", people + u + ":x:1000:1000::/home/" + u + ":/bin/bash\n", "root:x:0:\n", []string{"install"},
				[]string{"the user " + u + " exists and is not a system user (uid 1000)"}, false},
			{"a login user of the name, upgrade", people + u + ":x:1000:1000::/home/" + u + ":/bin/bash\n", "root:x:0:\n", []string{"upgrade", "1.0.0"},
				[]string{"the user " + u + " exists and is not a system user (uid 1000)"}, false},
			{"a login group of the name", people, u + ":x:1000:\n", []string{"install"},
				[]string{"the group " + u + " exists and is not a system group (gid 1000)"}, false},
		} {
			t.Run(pkg.name+"/"+tc.name, func(t *testing.T) {
				out, err, calls := runPreinst(t, pkg.name, tc.passwd, tc.group, tc.args...)
				if tc.refused != nil {
					if err == nil {
						t.Fatalf("accepted; want refused:\n%s", out)
					}
					for _, want := range tc.refused {
						if !strings.Contains(out, want) {
							t.Errorf("the refusal does not name %q:\n%s", want, out)
						}
					}
					if calls != "" {
						t.Errorf("a refused install created accounts:\n%s", calls)
					}
					return
				}
				if err != nil {
					t.Fatalf("refused (%v); want accepted:\n%s", err, out)
				}
				if got := strings.Contains(calls, "useradd"); got != !strings.Contains(tc.passwd, "\n"+u+":") {
					t.Errorf("useradd called %v with passwd %q:\n%s", got, tc.passwd, calls)
				}
				if got := strings.Contains(calls, "groupadd --system "+u); got != tc.creates {
					t.Errorf("groupadd called %v, want %v:\n%s", got, tc.creates, calls)
				}
			})
		}
	}
}
