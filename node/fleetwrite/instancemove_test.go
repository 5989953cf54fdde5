package fleetwrite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/fleet"
)

// portsUp is a PortChecker over a set of serving ports; it records what it was asked.
type portsUp struct {
	up    map[int]bool
	asked []string
}

func (p *portsUp) CheckPort(_ context.Context, port int, path string) error {
	p.asked = append(p.asked, fmt.Sprintf("%d%s", port, path))
	if !p.up[port] {
		return fmt.Errorf("nothing listens on 127.0.0.1:%d (connection refused)", port)
	}
	return nil
}

// TestAMoveToAPortThatDoesNotServeIsRefused: moving a ready instance to a port where
// nothing serves is refused before anything is written (a 409 "port not serving" naming
// the port and what failed), the health path is what is checked when the application
// has one, force skips the check, and what is not a move (not ready, the same port, a
// first declaration) is not checked.
func TestAMoveToAPortThatDoesNotServeIsRefused(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	ports := &portsUp{up: map[int]bool{24000: true}}
	f.w.cfg.Ports = ports
	putApp(t, f.w, "shop", fleet.App{Account: "acme", Placement: []string{"vps-a"}, Health: &fleet.Health{Path: "/healthz"}}, "")
	inst, _, err := f.w.AllocateInstance(ctx, admin, "shop")
	if err != nil || inst.Port != 24000 || inst.Ports != [2]int{24000, 24001} {
		t.Fatalf("allocate: %+v %v", inst, err)
	}
	if _, err := f.w.SetInstance(ctx, admin, "shop", nil, true); err != nil {
		t.Fatalf("ready on its own port: %v", err)
	}
	if len(ports.asked) != 0 {
		t.Fatalf("a readiness change was checked: %v", ports.asked)
	}
	_, err = f.w.SetInstance(ctx, admin, "shop", ptr(24001), true)
	var conf *ErrConflict
	if !errors.As(err, &conf) || conf.What != "port not serving" || !strings.Contains(conf.Detail, "port 24001") ||
		!strings.Contains(conf.Detail, "connection refused") {
		t.Fatalf("move to a dead port: %v, want a conflict \"port not serving\" naming 24001 and the failure", err)
	}
	if got, _ := f.w.inst.Get("shop"); got.Port != 24000 || !got.Ready {
		t.Fatalf("a refused move wrote: %+v", got)
	}
	if want := []string{"24001/healthz"}; fmt.Sprint(ports.asked) != fmt.Sprint(want) {
		t.Errorf("checked %v, want %v (the application's health path)", ports.asked, want)
	}
	// Not ready: no traffic goes there, not checked.
	if _, err := f.w.SetInstance(ctx, admin, "shop", ptr(24001), false); err != nil {
		t.Fatalf("a not-ready move: %v", err)
	}
	if _, err := f.w.SetInstance(ctx, admin, "shop", ptr(24000), true); err != nil {
		t.Fatalf("back to the serving port: %v", err)
	}
	// Forced: written without a check.
	ports.asked = nil
	got, err := f.w.PutInstance(ctx, admin, "shop", ptr(24001), true, true)
	if err != nil || got.Port != 24001 || len(ports.asked) != 0 {
		t.Fatalf("forced move: %+v %v, checked %v", got, err, ports.asked)
	}
	// A first declaration (no instance yet) is not a move.
	putApp(t, f.w, "blog", fleet.App{Account: "acme", Placement: []string{"vps-a"}}, "")
	if _, err := f.w.SetInstance(ctx, admin, "blog", ptr(24005), true); err != nil || len(ports.asked) != 0 {
		t.Fatalf("a first declaration: %v, checked %v", err, ports.asked)
	}
}

// TestAMoveCheckNeverProbesAnotherTenantsPort (hostile review 1, finding 2): a tenant's
// instance token moving its instance onto a port another application holds is refused as
// "port taken" before the serving check runs, so the node never probes another tenant's
// release for it (the probe's answer, a status or the first bytes of a foreign service,
// told it what listens there); and a refused move onto a free port tells the token only
// that the port does not serve, never the probe's words (the admin gets them).
func TestAMoveCheckNeverProbesAnotherTenantsPort(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	ports := &portsUp{up: map[int]bool{24000: true, 24002: true}}
	f.w.cfg.Ports = ports
	putApp(t, f.w, "bank", fleet.App{Account: "bankco", Placement: []string{"vps-a"}, Health: &fleet.Health{Path: "/healthz"}}, "")
	evil, _, _, err := f.w.PutApp(ctx, admin, "evil", fleet.App{Account: "mallory", Placement: []string{"vps-a"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.w.AllocateInstance(ctx, admin, "bank"); err != nil { // 24000, 24001
		t.Fatal(err)
	}
	if _, err := f.w.SetInstance(ctx, admin, "bank", nil, true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.w.AllocateInstance(ctx, admin, "evil"); err != nil { // 24002, 24003
		t.Fatal(err)
	}
	tok := Actor{Token: fleet.TokenRecord{ID: "0123456789abcdef", Account: "mallory", App: "evil", AppID: evil.ID, Roles: []string{fleet.RoleInstance}}}
	if _, err := f.w.SetInstance(ctx, tok, "evil", nil, true); err != nil {
		t.Fatal(err)
	}
	ports.asked = nil
	for _, p := range []int{24000, 24001} { // bank's pair
		_, err := f.w.SetInstance(ctx, tok, "evil", ptr(p), true)
		if !errors.Is(err, ErrPortTaken) {
			t.Errorf("evil's move onto bank's port %d: %v, want port taken", p, err)
		}
	}
	if len(ports.asked) != 0 {
		t.Fatalf("the node probed %v for evil's moves onto bank's ports", ports.asked)
	}
	// A free port that does not serve: the token learns only that.
	_, err = f.w.SetInstance(ctx, tok, "evil", ptr(24003), true)
	var conf *ErrConflict
	if !errors.As(err, &conf) || conf.What != "port not serving" || strings.Contains(conf.Detail, "connection refused") {
		t.Fatalf("evil's move to its own dead port: %v, want \"port not serving\" without the probe's words", err)
	}
	_, err = f.w.SetInstance(ctx, admin, "evil", ptr(24003), true)
	if !errors.As(err, &conf) || !strings.Contains(conf.Detail, "connection refused") {
		t.Fatalf("the admin's move to a dead port: %v, want the probe's words", err)
	}
}

// TestEveryMoveIsAudited: a move that takes effect (a port change) is audited as
// instance.move with actor, node, account, app, from and to ports, and whether its
// serving check ran (checked) or was skipped (forced); a readiness change on the same
// port routes or unroutes an instance and is audited as instance.ready (hostile review 1,
// finding 6); a refused move is not audited, and a move of a not-ready instance is
// neither checked nor forced.
func TestEveryMoveIsAudited(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.w.cfg.Ports = &portsUp{up: map[int]bool{24000: true, 24001: true}}
	putApp(t, f.w, "shop", fleet.App{Account: "acme", Placement: []string{"vps-a"}}, "")
	allocate(t, f.w, admin, "shop")
	for _, s := range []struct {
		port                  int
		ready, force, refused bool
	}{{24000, true, false, false}, {24000, false, false, false}, {24001, false, false, false}, {24001, true, false, false},
		{24003, true, false, true}, {24000, true, false, false}, {24003, true, true, false}} {
		if _, err := f.w.PutInstance(ctx, admin, "shop", ptr(s.port), s.ready, s.force); (err != nil) != s.refused {
			t.Fatalf("%+v: %v", s, err)
		}
	}
	recs, _, err := f.w.AuditFiltered(ctx, AuditFilter{Limit: 100, App: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if !strings.HasPrefix(r.Action, "instance.") {
			continue
		}
		if r.Actor != "admin" || r.Node != "vps-a" || r.Account != "acme" {
			t.Errorf("%s by %q on %q in %q, want admin on vps-a in acme", r.Action, r.Actor, r.Node, r.Account)
		}
		ready := r.Ready != nil && *r.Ready
		got = append(got, fmt.Sprintf("%s %d>%d ready=%v forced=%v checked=%v", r.Action, r.FromPort, r.ToPort, ready, r.Forced, r.Checked))
	}
	want := []string{ // newest first
		"instance.move 24000>24003 ready=true forced=true checked=false",
		"instance.move 24001>24000 ready=true forced=false checked=true",
		"instance.ready 0>24001 ready=true forced=false checked=false",
		"instance.move 24000>24001 ready=false forced=false checked=false",
		"instance.ready 0>24000 ready=false forced=false checked=false",
		"instance.ready 0>24000 ready=true forced=false checked=false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audited:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	moves, _, _ := f.w.AuditFiltered(ctx, AuditFilter{Limit: 100, Action: "instance.move"})
	other, _, _ := f.w.AuditFiltered(ctx, AuditFilter{Limit: 100, App: "nosuch"})
	if len(moves) != 3 || len(other) != 0 {
		t.Errorf("filtered on instance.move: %d records, want 3; on another app: %d, want 0", len(moves), len(other))
	}
}

// TestAMoveOntoAnEarlierIncarnationsPortIsRefusedBeforeItIsProbed: an application
// deleted and created again moves its instance onto a port its earlier incarnation
// left (quarantined): refused as taken, naming the earlier incarnation, before the port
// checker is asked, so the move never probes the release that may still serve there.
// Before, only the registry's own refusal after the probe guarded it (mutation check,
// M16: takenFor ignoring the incarnation failed no test).
func TestAMoveOntoAnEarlierIncarnationsPortIsRefusedBeforeItIsProbed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	ports := &portsUp{up: map[int]bool{24000: true, 24001: true, 24002: true, 24003: true}}
	f.w.cfg.Ports = ports
	f.app(t, "shop", "acme")
	first, _, err := f.w.AllocateInstance(ctx, admin, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.w.DeleteApp(ctx, admin, "shop", ""); err != nil {
		t.Fatal(err)
	}
	f.app(t, "shop", "acme")
	next, _, err := f.w.AllocateInstance(ctx, admin, "shop")
	if err != nil || next.Port == first.Port {
		t.Fatalf("the new incarnation's instance: %+v %v, want a port other than %d", next, err, first.Port)
	}
	if _, err := f.w.SetInstance(ctx, admin, "shop", nil, true); err != nil {
		t.Fatal(err)
	}
	ports.asked = nil
	p := first.Port
	_, err = f.w.SetInstance(ctx, admin, "shop", &p, true)
	var taken *portTakenError
	if !errors.As(err, &taken) || !strings.Contains(err.Error(), "an earlier incarnation of") {
		t.Fatalf("a move onto the earlier incarnation's port %d: %v, want it taken by an earlier incarnation of shop", p, err)
	}
	if len(ports.asked) != 0 {
		t.Errorf("the port checker was asked %v: the move probed a port it could not take", ports.asked)
	}
}
