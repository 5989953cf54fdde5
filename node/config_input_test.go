package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	s3store "github.com/scafo/ingress/node/store/s3"
)

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

// TestAnEndpointHoldingACredentialIsRefusedWithoutRepeatingIt: store.s3.endpoint
// https://KEY:SECRET@host (or KEY:SECRET@host, or a path or query) was accepted by the
// loader; the start line then logged store=s3://KEY:SECRET@host/… and the store's
// open failed quoting it again, both into the journal. The loader refuses such an
// endpoint now, and neither its error nor the S3 store's repeats the secret.
func TestAnEndpointHoldingACredentialIsRefusedWithoutRepeatingIt(t *testing.T) {
	base := []string{"--store.s3.bucket=b", "--node.address=10.0.0.1", "--platform.domains=apps.example.com"}
	for _, ep := range []string{"https://AKIA:s3cr3t@s3.example.com", "http://AKIA:s3cr3t@10.0.0.9:9000/", "AKIA:s3cr3t@s3.example.com:9000",
		"s3.example.com/bucket?X-Amz-Signature=s3cr3t", "s3.example.com#s3cr3t"} {
		_, err := loadConfig(t, append([]string{"--store.s3.endpoint=" + ep}, base...), nil)
		if err == nil {
			t.Errorf("store.s3.endpoint=%s accepted", ep)
			continue
		}
		if !strings.Contains(err.Error(), "store.s3.endpoint") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("store.s3.endpoint=%s: %v: want the setting named and the secret not repeated", ep, err)
		}
	}
	for _, ep := range []string{"s3.eu-west-1.amazonaws.com", "https://s3.eu-west-1.amazonaws.com/", "http://10.83.0.9:9000", "[::1]:9000"} {
		if _, err := loadConfig(t, append([]string{"--store.s3.endpoint=" + ep}, base...), nil); err != nil {
			t.Errorf("store.s3.endpoint=%s: %v", ep, err)
		}
	}
	for _, ep := range []string{"https://AKIA:s3cr3t@s3.example.com", "AKIA:s3cr3t@s3.example.com", "https://AKIA:s3cr3t@s3.example.com/x?y"} {
		_, err := s3store.New(context.Background(), s3store.Config{Endpoint: ep, Bucket: "b"})
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the S3 store opened on %s: %v, want an error that does not repeat the secret", ep, err)
		}
	}
}
