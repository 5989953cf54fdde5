package fleetwrite

// Hostile review of port pairs (da09cbd): one tenant's application against another's
// pair, and a corrupt instances.json.

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestHostilePairAnotherAppCannotTakeEitherMemberOfAPair(t *testing.T) {
	reg := openTestRegistry(t, filepath.Join(t.TempDir(), "instances.json"))
	_, shop := mustAllocate(t, reg, "shop", "id-shop")
	_, blog := mustAllocate(t, reg, "blog", "id-blog")
	if shop[0] == blog[0] || shop[0] == blog[1] || shop[1] == blog[0] || shop[1] == blog[1] {
		t.Fatalf("pairs overlap: shop %v blog %v", shop, blog)
	}
	for _, p := range shop {
		p := p
		if _, _, _, err := reg.Set("blog", "id-blog", &p, true); !errors.Is(err, ErrPortTaken) {
			t.Errorf("blog set onto shop's port %d: %v, want ErrPortTaken", p, err)
		}
	}
	// A move outside the pair leaves the old port quarantined for shop alone.
	mustSet(t, reg, "shop", "id-shop", 24008)
	old := shop[0]
	if _, _, _, err := reg.Set("blog", "id-blog", &old, true); !errors.Is(err, ErrPortTaken) {
		t.Errorf("blog set onto the port shop left: %v, want ErrPortTaken", err)
	}
	if got := reg.Ports("shop"); got != [2]int{shop[1], 24008} {
		t.Errorf("shop's pair after a move out: %v, want [%d 24008]", got, shop[1])
	}
}

func TestHostilePairReleasedOrRecreatedPairIsNeverInherited(t *testing.T) {
	reg := openTestRegistry(t, filepath.Join(t.TempDir(), "instances.json"))
	_, shop := mustAllocate(t, reg, "shop", "id-shop")
	if err := reg.Release("shop"); err != nil {
		t.Fatal(err)
	}
	// Another application's first allocation skips both quarantined members.
	if _, ports := mustAllocate(t, reg, "blog", "id-blog"); ports[0] == shop[0] || ports[1] == shop[1] || ports[0] == shop[1] {
		t.Errorf("blog allocated %v inside shop's released pair %v", ports, shop)
	}
	// A recreated shop (another incarnation) gets neither.
	_, again := mustAllocate(t, reg, "shop", "id-shop-2")
	for _, p := range again {
		if p == shop[0] || p == shop[1] {
			t.Errorf("recreated shop got %v, overlapping the old incarnation's pair %v", again, shop)
		}
	}
	for _, p := range shop {
		p := p
		if _, _, _, err := reg.Set("shop", "id-shop-2", &p, true); !errors.Is(err, ErrPortTaken) {
			t.Errorf("recreated shop set onto its predecessor's port %d: %v, want ErrPortTaken", p, err)
		}
	}
}

func TestHostilePairChurnStaysBoundedAcrossReleaseAndReallocate(t *testing.T) {
	reg, err := OpenRegistry(filepath.Join(t.TempDir(), "instances.json"), 24000, 24099, 60e9)
	if err != nil {
		t.Fatal(err)
	}
	mustAllocate(t, reg, "shop", "id-shop")
	for round := 0; round < 10; round++ {
		for p := 24050; p < 24099; p++ {
			p := p
			reg.Set("shop", "id-shop", &p, true) // churn errors expected beyond the bound
		}
		reg.Release("shop")
		reg.Allocate("shop", "id-shop")
	}
	held := len(quarantinedPorts(reg)) + 2
	if held > MaxQuarantinedPorts+4 {
		t.Errorf("one application holds %d ports after churn, release and reallocate, want at most %d", held, MaxQuarantinedPorts+4)
	}
}

// writeCorrupt writes an instances.json by hand (a corrupt or hand-edited file).
func writeCorrupt(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "instances.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
