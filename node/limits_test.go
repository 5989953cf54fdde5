package node_test

// Connection limits and deadlines (limits.go), their settings, and the rate-limited
// rejection log.

import (
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
