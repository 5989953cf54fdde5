package probe

// Hostile review of flap damping whatever the port (e2b349c): a dead instance released
// and set again on the same port.

import (
	"github.com/scafo/ingress/node/internal/testinst"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// Damping whatever the port (e2b349c) keeps an instance's damping across a release only
// "while its damping counts" (dampedLocked: a hold-down, or a recovery within the
// window). A dead instance found down before any recovery counts nothing: released
// (one probe round seeing it gone) and set again on the same dead port, it starts
// afresh, trusted up, and is published ready, then down, every cycle, without end.
// Each cycle is a record rewrite and a serial bump: a reload of every Traefik.
func TestHostileReleaseAndSetAgainOfADeadInstanceIsDamped(t *testing.T) {
	dead := testinst.StartTCP(t)
	dead.Close()
	cfg := dampedConfig()
	inst := fleet.Instance{Port: dead.Port, Ready: true, AppID: "id-shop"}
	p, insts, _, changes := newMovableProber(t, cfg, map[string]fleet.Instance{"shop": inst})
	const cycles = 20
	deadReady := 0
	for i := range cycles {
		insts.set("shop", &inst)
		if p.Publish(insts.all())["shop"].Ready {
			deadReady++
		}
		for range cfg.DownAfter {
			probeRound(t, p)
		}
		if p.isUp("shop") {
			t.Fatalf("cycle %d: up after %d refused probes", i, cfg.DownAfter)
		}
		insts.set("shop", nil)
		probeRound(t, p) // the round sees the release
	}
	t.Logf("%d release/set cycles of a dead port: published ready %d times, %d probe changes", cycles, deadReady, changes.Load())
	if deadReady > cfg.FlapUps {
		t.Errorf("a dead port released and set again was published ready %d times in %d cycles, want at most %d (damped like a port move)", deadReady, cycles, cfg.FlapUps)
	}
	if max := int64(2*cfg.FlapUps - 1); changes.Load() > max {
		t.Errorf("%d probe changes published, want at most %d", changes.Load(), max)
	}
}
