package fleetwrite

// Port pairs (docs/design.md §13, issue 24 item 2): each application incarnation owns two ports
// per node, chosen once and kept, so a deploy alternates between them with no quarantine.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

func openTestRegistry(t *testing.T, path string) *Registry {
	t.Helper()
	reg, err := OpenRegistry(path, 24000, 24009, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func mustAllocate(t *testing.T, reg *Registry, app, appID string) (fleet.Instance, [2]int) {
	t.Helper()
	inst, ports, _, err := reg.Allocate(app, appID)
	if err != nil {
		t.Fatalf("allocate %s: %v", app, err)
	}
	return inst, ports
}

func mustSet(t *testing.T, reg *Registry, app, appID string, port int) [2]int {
	t.Helper()
	_, ports, _, err := reg.Set(app, appID, &port, true)
	if err != nil {
		t.Fatalf("set %s to %d: %v", app, port, err)
	}
	return ports
}

func quarantinedPorts(reg *Registry) []int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var out []int
	for _, q := range reg.state.Quarantine {
		out = append(out, q.Port)
	}
	return out
}

func TestAnInstancesPairIsAllocatedPersistedAndSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "instances.json")
	reg := openTestRegistry(t, path)
	reg.Reserve(24002) // the API port is never a member of a pair
	inst, ports := mustAllocate(t, reg, "shop", "id-shop")
	if inst.Port != 24000 || ports != [2]int{24000, 24001} {
		t.Fatalf("first allocation: port %d pair %v, want 24000 in [24000 24001]", inst.Port, ports)
	}
	// The next application gets the next two free ports (not 24001, shop's idle port,
	// nor the API port).
	if inst, ports := mustAllocate(t, reg, "blog", "id-blog"); inst.Port != 24003 || ports != [2]int{24003, 24004} {
		t.Fatalf("second application: port %d pair %v, want 24003 in [24003 24004]", inst.Port, ports)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"pairs"`) {
		t.Fatalf("instances.json holds no pairs:\n%s", b)
	}
	reopened := openTestRegistry(t, path)
	reopened.Reserve(24002)
	for app, want := range map[string][2]int{"shop": {24000, 24001}, "blog": {24003, 24004}} {
		if got := reopened.Ports(app); got != want {
			t.Errorf("%s after reopen: pair %v, want %v", app, got, want)
		}
		_, ports, created, err := reopened.Allocate(app, "id-"+app)
		if err != nil || created || ports != want {
			t.Errorf("%s allocated again after reopen: %v created=%v %v, want %v", app, ports, created, err, want)
		}
	}
	if inst, ports := mustAllocate(t, reopened, "wiki", "id-wiki"); inst.Port != 24005 || ports != [2]int{24005, 24006} {
		t.Fatalf("a third application after reopen: port %d pair %v, want [24005 24006]", inst.Port, ports)
	}
}

func TestTheAPIAnswersThePairBesideThePort(t *testing.T) {
	f := newFixture(t)
	f.app(t, "shop", "acme")
	inst, _, err := f.w.AllocateInstance(context.Background(), admin, "shop")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(inst)
	if inst.Ports != [2]int{24000, 24001} || !strings.Contains(string(b), `"port":24000,"ready":false,"ports":[24000,24001]`) {
		t.Fatalf("allocate answered %s, want port 24000 and ports [24000,24001]", b)
	}
	p := 24001 // the deploy recipe: the member of ports that is not port
	moved, err := f.w.SetInstance(context.Background(), admin, "shop", &p, true)
	if err != nil || moved.Port != 24001 || moved.Ports != [2]int{24000, 24001} {
		t.Fatalf("move within the pair: %+v %v", moved, err)
	}
	if l := f.w.Instances(); len(l) != 1 || l[0].Ports != [2]int{24000, 24001} {
		t.Fatalf("listing: %+v", l)
	}
}

func TestAnOldInstancesFileWithoutPairsLoadsAndGetsASecondPort(t *testing.T) {
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	old := `{"instances":{"shop":{"port":24000,"ready":true,"appId":"id-shop"},"blog":{"port":24001,"ready":true,"appId":"id-blog"}},` +
		`"quarantine":[{"port":24002,"app":"gone","appId":"id-gone","until":"` + until + `"}]}`
	for _, tc := range []struct {
		name  string
		write func(*testing.T, *Registry) [2]int
	}{
		{"at the next allocation", func(t *testing.T, reg *Registry) [2]int { _, p := mustAllocate(t, reg, "shop", "id-shop"); return p }},
		{"at the next set of readiness", func(t *testing.T, reg *Registry) [2]int {
			_, p, _, err := reg.Set("shop", "id-shop", nil, false)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"at the next set of its own port", func(t *testing.T, reg *Registry) [2]int { return mustSet(t, reg, "shop", "id-shop", 24000) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "instances.json")
			if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
				t.Fatal(err)
			}
			reg := openTestRegistry(t, path)
			if got := reg.Ports("shop"); got != [2]int{24000, 24000} {
				t.Fatalf("an old instance before any write: pair %v, want [24000 24000] (unpaired)", got)
			}
			// 24001 is blog's, 24002 quarantined: the lowest free port is 24003.
			if got := tc.write(t, reg); got != [2]int{24000, 24003} {
				t.Fatalf("pair %v, want [24000 24003]", got)
			}
			if inst, _ := reg.Get("shop"); inst.Port != 24000 {
				t.Fatalf("the upgrade moved the instance: %+v", inst)
			}
			if got := openTestRegistry(t, path).Ports("shop"); got != [2]int{24000, 24003} {
				t.Fatalf("the upgraded pair after reopen: %v", got)
			}
			if _, _, _, err := reg.Set("wiki", "id-wiki", ptr(24003), true); !errors.Is(err, ErrPortTaken) {
				t.Fatalf("another app onto the new second port: %v, want ErrPortTaken", err)
			}
		})
	}
}

func ptr(p int) *int { return &p }

// TestAnotherAppCannotTakeTheIdlePortOfAPair: after a deploy (shop moved to the other
// member of its pair), the member it left is still shop's: another application can
// neither set onto it nor be allocated either member. Before a deploy, either member,
// through the API: TestHostileInstanceWrites; an application token through the writer,
// told nothing of another account's holder: TestPortTakenNamesNoOtherAccountsApplication.
func TestAnotherAppCannotTakeTheIdlePortOfAPair(t *testing.T) {
	reg := openTestRegistry(t, filepath.Join(t.TempDir(), "instances.json"))
	mustAllocate(t, reg, "shop", "id-shop")
	mustSet(t, reg, "shop", "id-shop", 24001)
	if _, _, _, err := reg.Set("evil", "id-evil", ptr(24000), true); !errors.Is(err, ErrPortTaken) {
		t.Fatalf("another app onto 24000, the member shop's deploy left: %v, want ErrPortTaken", err)
	}
	if inst, ports := mustAllocate(t, reg, "evil", "id-evil"); inst.Port == 24000 || ports[0] <= 24001 {
		t.Fatalf("another app allocated %d %v: a member of shop's pair", inst.Port, ports)
	}
}

func TestMovingAcrossThePairNeverChurnsNorQuarantines(t *testing.T) {
	reg := openTestRegistry(t, filepath.Join(t.TempDir(), "instances.json"))
	_, pair := mustAllocate(t, reg, "shop", "id-shop")
	for i := range 100 {
		to := pair[(i+1)%2]
		inst, ports, changed, err := reg.Set("shop", "id-shop", &to, true)
		if err != nil {
			t.Fatalf("move %d to %d: %v", i, to, err)
		}
		if inst.Port != to || ports != pair || !changed {
			t.Fatalf("move %d: %+v pair %v changed=%v, want port %d in %v", i, inst, ports, changed, to, pair)
		}
	}
	if q := quarantinedPorts(reg); len(q) != 0 {
		t.Fatalf("moves within the pair quarantined %v", q)
	}
	// Still room for a move outside the pair (nothing counted against the churn bound).
	for p := 24002; p < 24002+MaxQuarantinedPorts; p++ {
		mustSet(t, reg, "shop", "id-shop", p)
	}
}

func TestAMoveOutsideThePairQuarantinesThePortLeft(t *testing.T) {
	for _, tc := range []struct {
		name      string
		from      int    // shop's port before the move (pair 24000, 24001)
		to        int    // outside the pair
		wantPair  [2]int // {to, the idle member}
		wantQuart int    // the port left
	}{
		{"from the allocated port", 24000, 24005, [2]int{24001, 24005}, 24000},
		{"from the idle port after a deploy", 24001, 24005, [2]int{24000, 24005}, 24001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := openTestRegistry(t, filepath.Join(t.TempDir(), "instances.json"))
			mustAllocate(t, reg, "shop", "id-shop")
			mustSet(t, reg, "shop", "id-shop", tc.from)
			if got := mustSet(t, reg, "shop", "id-shop", tc.to); got != tc.wantPair {
				t.Fatalf("pair after the move %v, want %v", got, tc.wantPair)
			}
			if q := quarantinedPorts(reg); len(q) != 1 || q[0] != tc.wantQuart {
				t.Fatalf("quarantined %v, want [%d]", q, tc.wantQuart)
			}
			if _, _, _, err := reg.Set("blog", "id-blog", ptr(tc.wantQuart), true); !errors.Is(err, ErrPortTaken) || !strings.Contains(err.Error(), "quarantined") {
				t.Fatalf("another app onto the port left: %v, want ErrPortTaken (quarantined)", err)
			}
		})
	}
	// The churn rule still bounds moves outside the pair.
	reg := openTestRegistry(t, filepath.Join(t.TempDir(), "instances.json"))
	reg.max = 24000 + 3*MaxQuarantinedPorts
	mustAllocate(t, reg, "shop", "id-shop")
	var err error
	moves := 0
	for p := 24002; p <= reg.max && err == nil; p++ {
		if _, _, _, err = reg.Set("shop", "id-shop", ptr(p), true); err == nil {
			moves++
		}
	}
	if !errors.Is(err, ErrPortChurn) || moves != MaxQuarantinedPorts {
		t.Fatalf("after %d moves outside the pair: %v, want ErrPortChurn after %d", moves, err, MaxQuarantinedPorts)
	}
}

func TestAReleaseQuarantinesBothPortsOfThePair(t *testing.T) {
	path := filepath.Join(t.TempDir(), "instances.json")
	reg := openTestRegistry(t, path)
	mustAllocate(t, reg, "shop", "id-shop")
	mustSet(t, reg, "shop", "id-shop", 24001)
	if err := reg.Release("shop"); err != nil {
		t.Fatal(err)
	}
	if q := quarantinedPorts(reg); len(q) != 2 || q[0] != 24000 || q[1] != 24001 {
		t.Fatalf("quarantined %v after the release, want [24000 24001]", q)
	}
	reg = openTestRegistry(t, path) // and so it stays across a restart
	for _, p := range []int{24000, 24001} {
		if _, _, _, err := reg.Set("blog", "id-blog", ptr(p), true); !errors.Is(err, ErrPortTaken) {
			t.Errorf("another app onto released port %d: %v, want ErrPortTaken", p, err)
		}
	}
	if inst, ports := mustAllocate(t, reg, "wiki", "id-wiki"); inst.Port != 24002 || ports != [2]int{24002, 24003} {
		t.Fatalf("the next allocation got %d %v, want [24002 24003]", inst.Port, ports)
	}
	// The incarnation that released it takes its own pair back, whole.
	if got := mustSet(t, reg, "shop", "id-shop", 24001); got != [2]int{24000, 24001} {
		t.Fatalf("shop back after its release: pair %v, want [24000 24001]", got)
	}
	if q := quarantinedPorts(reg); len(q) != 0 {
		t.Fatalf("quarantined %v once shop took its pair back", q)
	}
}

func TestANewIncarnationGetsADifferentPair(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(*testing.T, *Registry) [2]int
	}{
		{"by allocation", func(t *testing.T, r *Registry) [2]int { _, p := mustAllocate(t, r, "shop", "id-new"); return p }},
		{"by set", func(t *testing.T, r *Registry) [2]int { return mustSet(t, r, "shop", "id-new", 24005) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := openTestRegistry(t, filepath.Join(t.TempDir(), "instances.json"))
			_, old := mustAllocate(t, reg, "shop", "id-old")
			got := tc.make(t, reg)
			if got[0] == old[0] || got[0] == old[1] || got[1] == old[0] || got[1] == old[1] {
				t.Fatalf("the new incarnation's pair %v shares a port with the old one's %v", got, old)
			}
			for _, p := range old {
				_, _, _, err := reg.Set("shop", "id-new", ptr(p), true)
				if !errors.Is(err, ErrPortTaken) || !strings.Contains(err.Error(), "earlier incarnation") {
					t.Errorf("the new incarnation onto the old one's port %d: %v, want ErrPortTaken (an earlier incarnation)", p, err)
				}
			}
			if q := quarantinedPorts(reg); len(q) != 2 {
				t.Fatalf("quarantined %v, want both ports of the old pair", q)
			}
		})
	}
}
