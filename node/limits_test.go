package node_test

// Connection limits and deadlines (limits.go), their settings, and the rate-limited
// rejection log.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node"
)

// TestLimitsSettings: the limits load from flags and the environment, are checked, and
// the connection cap is derived from the open-file limit when not set.
func TestLimitsSettings(t *testing.T) {
	cfg, err := loadConfig(t, []string{"--limits.maxConns=100", "--limits.bodyTimeout=3s", "--node.name=vps-a"},
		[]string{"SCAFO_LIMITS_RESERVEDCONNS=10", "SCAFO_LIMITS_IDLETIMEOUT=45s"})
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Limits
	if l.MaxConns != 100 || l.ReservedConns != 10 || time.Duration(l.BodyTimeout) != 3*time.Second ||
		time.Duration(l.IdleTimeout) != 45*time.Second || time.Duration(l.HeaderTimeout) != 5*time.Second {
		t.Fatalf("loaded %+v", l)
	}
	if total, reserved := l.Conns(); total != 100 || reserved != 10 {
		t.Errorf("conns %d/%d, want 100/10", total, reserved)
	}
	for _, bad := range [][]string{
		{"--limits.maxConns=10", "--limits.reservedConns=10"},
		{"--limits.maxConns=-1"},
		{"--limits.bodyTimeout=0s"},
		{"--limits.rejectLog=0s"},
	} {
		if _, err := loadConfig(t, append(bad, "--node.name=vps-a"), nil); err == nil || !strings.Contains(err.Error(), "limits.") {
			t.Errorf("%v: %v, want an error naming the setting", bad, err)
		}
	}
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

func TestAnAPIPortInsideTheAllocationRangeIsRefused(t *testing.T) {
	cfg := node.NewConfig()
	cfg.Node.Name, cfg.StateDir = "vps-a", t.TempDir()
	cfg.Listen = "127.0.0.1:24000"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "node.apiPort") {
		t.Fatalf("listen on a port of the allocation range: %v, want an error naming node.apiPort", err)
	}
}

// TestLimitsTrustedProxiesIsRefusedAsRemoved: a configuration that still sets
// limits.trustedProxies (a flag, a variable, a file key) does not start, and the error
// names the setting as removed, not as unknown.
func TestLimitsTrustedProxiesIsRefusedAsRemoved(t *testing.T) {
	file := filepath.Join(t.TempDir(), "scafo.yaml")
	os.WriteFile(file, []byte("limits:\n  trustedProxies: [\"10.0.0.0/8\"]\n"), 0o600)
	for what, src := range map[string]struct{ args, environ []string }{
		"flag":     {[]string{"--limits.trustedProxies=10.0.0.0/8"}, nil},
		"variable": {nil, []string{"SCAFO_LIMITS_TRUSTEDPROXIES=10.0.0.0/8"}},
		"file":     {[]string{"--configFile=" + file}, nil},
	} {
		_, err := loadConfig(t, append([]string{"--stateDir=" + t.TempDir()}, src.args...), src.environ)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "removed setting") || !strings.Contains(err.Error(), "rustedProxies") ||
			strings.Contains(err.Error(), "unknown") || strings.Contains(err.Error(), "not a setting") {
			t.Errorf("%s: %v, want an error naming limits.trustedProxies as a removed setting", what, err)
		}
	}
}
