package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigLoaderSurvivesHostileInput: whatever a configuration file, the environment
// or the flags hold, the loader answers with an error (or a configuration) in bounded
// time: no panic, no unbounded work. YAML alias bombs, deep nesting in YAML and TOML,
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
	for _, c := range cases {
		start := time.Now()
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
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: the loader took %s", c.name, d.Round(time.Millisecond))
		} else {
			t.Logf("%s: %s", c.name, d.Round(time.Millisecond))
		}
	}
}
