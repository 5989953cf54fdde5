package fleetwrite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

var admin = Actor{Admin: true}

type fixture struct {
	w       *Writer
	st      store.Store
	id      *store.Identity
	commits []string
	beats   int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := OpenRegistry(filepath.Join(t.TempDir(), "instances.json"), 24000, 24009, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, id: &store.Identity{}}
	f.w = New(Config{
		Node:            "vps-a",
		PlatformDomains: []string{"apps.example.com"},
		APIPort:         7400,
		OnCommit:        func(a string) { f.commits = append(f.commits, a) },
		OnInstances:     func() { f.beats++ },
	}, st, f.id, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return f
}

func (f *fixture) serial(t *testing.T) string {
	t.Helper()
	o, err := f.st.Get(context.Background(), fleet.KeySerial)
	if errors.Is(err, store.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(o.Value)
}

func (f *fixture) audits(t *testing.T) int {
	t.Helper()
	es, err := f.st.List(context.Background(), prefixAudit)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func (f *fixture) app(t *testing.T, name, account string) fleet.App {
	t.Helper()
	a, _, _, err := f.w.PutApp(context.Background(), admin, name, fleet.App{Account: account}, "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestIdenticalPutAppWritesAuditsAndBumpsNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, etag, created, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Placement: []string{"vps-a"}}, "")
	if err != nil || !created || a.Name != "shop" || etag == "" {
		t.Fatalf("first put: %+v created=%v err=%v", a, created, err)
	}
	serial, audits := f.serial(t), f.audits(t)
	if serial == "" || audits != 1 || len(f.commits) != 1 {
		t.Fatalf("after a change: serial %q, %d audit rows, commits %v", serial, audits, f.commits)
	}
	_, again, created, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Placement: []string{"vps-a"}}, "")
	if err != nil || created || again != etag {
		t.Fatalf("identical put: created=%v err=%v etag %q, want the stored %q (a client's If-Match keeps matching)", created, err, again, etag)
	}
	if got := f.serial(t); got != serial || f.audits(t) != 1 || len(f.commits) != 1 {
		t.Fatalf("identical put moved something: serial %q -> %q, audits %d, commits %v", serial, got, f.audits(t), f.commits)
	}
}

func TestPutAppRefusesAnAccountChangeNamingTheHolder(t *testing.T) {
	f := newFixture(t)
	f.app(t, "shop", "acme")
	_, _, _, err := f.w.PutApp(context.Background(), admin, "shop", fleet.App{Account: "evil"}, "")
	var c *ErrConflict
	if !errors.As(err, &c) || c.Holder != "acme" {
		t.Fatalf("got %v, want ErrConflict held by acme", err)
	}
}

// TestPutAppNamesTheInvalidField: an application's every field is checked at its write;
// a refusal is an ErrInvalid (a 400) naming the field or the list entry, and writes
// nothing. proxyProtocol is absent or 2 and only with passthrough, and a passthrough
// application declares no HTTP health path; middlewares are only those the node's
// configuration declares (traefik.middlewares), each once, in name@provider form, none
// on a passthrough application. A declared list is stored in its order, and its write
// warns that Caddy ingresses do not apply it.
func TestPutAppNamesTheInvalidField(t *testing.T) {
	declared := []string{"auth@file", "www-redirect@file"}
	for _, tc := range []struct {
		app      fleet.App
		declared []string // traefik.middlewares
		field    string   // "" when valid
		detail   string
	}{
		{fleet.App{Account: "Bad Account"}, nil, "account", ""},
		{fleet.App{Account: "acme", Placement: []string{"a", "a"}}, nil, "placement[1]", ""},
		{fleet.App{Account: "acme", Health: &fleet.Health{Path: "nope"}}, nil, "health.path", ""},
		{fleet.App{Name: "other", Account: "acme"}, nil, "name", ""},
		{fleet.App{Account: "acme", Passthrough: true}, nil, "", ""},
		{fleet.App{Account: "acme", Passthrough: true, ProxyProtocol: 2}, nil, "", ""},
		{fleet.App{Account: "acme", Passthrough: true, ProxyProtocol: 1}, nil, "proxyProtocol", ""},
		{fleet.App{Account: "acme", ProxyProtocol: 2}, nil, "proxyProtocol", ""},
		{fleet.App{Account: "acme", Passthrough: true, Health: &fleet.Health{Path: "/healthz"}}, nil, "health.path", ""},
		{fleet.App{Account: "acme", Middlewares: []string{"www-redirect@file", "auth@file"}}, declared, "", ""},
		{fleet.App{Account: "acme", Middlewares: []string{}}, declared, "", ""},
		{fleet.App{Account: "acme", Middlewares: []string{"auth@file", "basic@file"}}, declared, "middlewares[1]", "traefik.middlewares: auth@file, www-redirect@file"},
		{fleet.App{Account: "acme", Middlewares: []string{"auth@docker"}}, declared, "middlewares[0]", "not a middleware this node's configuration declares"},
		{fleet.App{Account: "acme", Middlewares: []string{"auth"}}, declared, "middlewares[0]", "name@provider"},
		{fleet.App{Account: "acme", Middlewares: []string{"auth@file", "auth@file"}}, declared, "middlewares[1]", "listed twice"},
		{fleet.App{Account: "acme", Passthrough: true, Middlewares: []string{"auth@file"}}, declared, "middlewares", "a middleware is HTTP"},
		{fleet.App{Account: "acme", Middlewares: []string{"auth@file"}}, nil, "middlewares[0]", ""}, // a node that declares none
	} {
		f := newFixture(t)
		f.w.cfg.Middlewares = tc.declared
		a, _, _, err := f.w.PutApp(context.Background(), admin, "shop", tc.app, "")
		if tc.field == "" {
			stored, _, serr := f.w.App(context.Background(), "shop")
			caddy := slices.ContainsFunc(f.w.AppWarnings(a), func(w string) bool { return strings.Contains(w, "a Caddy ingress answers 503") })
			if err != nil || serr != nil || !slices.Equal(stored.Middlewares, tc.app.Middlewares) || caddy != (len(tc.app.Middlewares) > 0) {
				t.Fatalf("%+v: %v (%v), stored middlewares %v, Caddy warning %v", tc.app, err, serr, stored.Middlewares, caddy)
			}
			continue
		}
		wantInvalid(t, f, "", err, tc.field)
		if !strings.Contains(err.Error(), tc.detail) || f.audits(t) != 0 {
			t.Fatalf("%v: want it to say %q, with no audit row (%d)", err, tc.detail, f.audits(t))
		}
	}
}

// TestClaimRefusesPlatformNames: a platform domain's names, and
// a wildcard over one or over its apex, are never a custom claim; nor is a wildcard
// directly over a public suffix (it would cover names registered by others), while a
// wildcard one label below one is. Each refusal is an ErrInvalid on the host.
func TestClaimRefusesPlatformNames(t *testing.T) {
	f := newFixture(t)
	f.app(t, "a", "acme")
	for _, tc := range []struct{ host, refusal string }{ // refusal: "" = claimed
		{"x.apps.example.com", "platform"},
		{"*.apps.example.com", "platform"},
		{"y.x.apps.example.com", "platform"},
		{"*.example.com", "platform"},
		{"*.co.uk", "public suffix"},
		{"*.github.io", "public suffix"},
		{"*.com.au", "public suffix"},
		{"*.s3.amazonaws.com", "public suffix"},
		{"*.shop.example.org", ""},
		{"*.bank.co.uk", ""},
		{"*.me.github.io", ""},
		{"bank.co.uk", ""},
	} {
		_, _, _, err := f.w.Claim(context.Background(), admin, "a", tc.host)
		var inv *ErrInvalid
		if tc.refusal == "" && err != nil {
			t.Errorf("%s: %v", tc.host, err)
		} else if tc.refusal != "" && (!errors.As(err, &inv) || inv.Field != "host" || !strings.Contains(err.Error(), tc.refusal)) {
			t.Errorf("%s: %v, want ErrInvalid on host naming the %s", tc.host, err, tc.refusal)
		}
	}
}

func TestPublishPathsIsCompareAndSwapAndARepublishIsFree(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "classic", "tito")
	f.app(t, "go", "tito")
	_, etag, _, err := f.w.Claim(ctx, admin, "classic", "ti.to")
	if err != nil {
		t.Fatal(err)
	}
	_, etag2, err := f.w.PublishPaths(ctx, admin, "classic", "ti.to", map[string]string{"paulca": "GO.tito.io"}, etag)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := f.w.Paths(ctx, admin, "classic", "ti.to")
	if err != nil || c.Paths["paulca"] != "go.tito.io" {
		t.Fatalf("paths after publish: %v %v (want the folded target)", c.Paths, err)
	}
	if _, _, err := f.w.PublishPaths(ctx, admin, "classic", "ti.to", map[string]string{}, etag); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("stale If-Match: %v, want ErrPrecondition", err)
	}
	serial, audits := f.serial(t), f.audits(t)
	if _, e, err := f.w.PublishPaths(ctx, admin, "classic", "ti.to", map[string]string{"paulca": "go.tito.io"}, ""); err != nil || e != etag2 {
		t.Fatalf("republish: etag %q err %v, want the unchanged %q", e, err, etag2)
	}
	if f.serial(t) != serial || f.audits(t) != audits {
		t.Fatal("a no-op republish bumped the serial or wrote an audit row")
	}
	if a, err := f.w.Audit(ctx, 1); err != nil || len(a) != 1 || a[0].Action != "paths.put" || a[0].Prefixes != 1 || a[0].Host != "ti.to" {
		t.Fatalf("the newest audit record: %+v (%v), want paths.put of 1 prefix on ti.to", a, err)
	}
}

func TestPublishPathsRefusesOtherCredentialsAndHosts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "classic", "tito")
	evil := f.app(t, "evil", "evil")
	claim(t, f.w, "classic", "ti.to")
	claim(t, f.w, "evil", "evil.example")
	evilTok := Actor{Token: fleet.TokenRecord{ID: "0123456789abcdef", Account: "evil", App: "evil", AppID: evil.ID, Roles: []string{fleet.RolePublish}}}
	var forb *ErrForbidden
	if _, _, err := f.w.PublishPaths(ctx, evilTok, "classic", "ti.to", map[string]string{}, ""); !errors.As(err, &forb) {
		t.Fatalf("another app's token: %v, want ErrForbidden", err)
	}
	if _, _, err := f.w.PublishPaths(ctx, evilTok, "nosuchapp", "ti.to", map[string]string{}, ""); !errors.As(err, &forb) {
		t.Fatalf("a token on an app that does not exist: %v, want the same ErrForbidden", err)
	}
	// An application token of classic's own account: scoped to its application (the
	// scope check, before the incarnation check), and refused outright on the control
	// plane.
	goTok := tokenFor(f.app(t, "go", "tito"), fleet.RolePublish)
	claim(t, f.w, "go", "go.tito.io")
	if _, _, err := f.w.PublishPaths(ctx, goTok, "go", "go.tito.io", map[string]string{}, ""); err != nil {
		t.Fatalf("its own claim: %v", err)
	}
	if _, _, err := f.w.PublishPaths(ctx, goTok, "classic", "ti.to", map[string]string{}, ""); !errors.As(err, &forb) ||
		!strings.Contains(forb.Detail, "scoped to application go") {
		t.Fatalf("another application of its account: %v, want ErrForbidden saying it is scoped to application go", err)
	}
	putApp(t, f.w, "go", fleet.App{Account: "tito", ControlPlane: true}, "")
	if _, _, err := f.w.PublishPaths(ctx, goTok, "go", "go.tito.io", map[string]string{}, ""); !errors.As(err, &forb) || forb.What != "control plane" {
		t.Fatalf("on the control plane: %v, want ErrForbidden (control plane)", err)
	}
	// Another tenant's host and a host nobody claimed read the same.
	_, _, held := f.w.PublishPaths(ctx, evilTok, "evil", "ti.to", map[string]string{}, "")
	_, _, free := f.w.PublishPaths(ctx, evilTok, "evil", "free.example", map[string]string{}, "")
	if !errors.Is(held, ErrNotFound) || !errors.Is(free, ErrNotFound) ||
		strings.ReplaceAll(held.Error(), "ti.to", "X") != strings.ReplaceAll(free.Error(), "free.example", "X") {
		t.Fatalf("held: %v; free: %v: want one ErrNotFound answer for both", held, free)
	}
	if _, _, err := f.w.PublishPaths(ctx, evilTok, "evil", "evil.example", map[string]string{}, ""); err != nil {
		t.Fatalf("its own host: %v", err)
	}
	var inv *ErrInvalid
	if _, _, err := f.w.PublishPaths(ctx, admin, "classic", "ti.to", map[string]string{"/paulca": "go.tito.io"}, ""); !errors.As(err, &inv) || !strings.Contains(inv.Field, "/paulca") {
		t.Fatalf("a bad prefix: %v, want ErrInvalid naming it", err)
	}
	tooMany := map[string]string{}
	for i := range routing.MaxPaths + 1 {
		tooMany[fmt.Sprintf("p%05d", i)] = "go.tito.io"
	}
	if _, _, err := f.w.PublishPaths(ctx, admin, "classic", "ti.to", tooMany, ""); !errors.As(err, &inv) || !strings.Contains(err.Error(), fmt.Sprint(routing.MaxPaths)) {
		t.Fatalf("%d prefixes: %v, want ErrInvalid naming the cap", len(tooMany), err)
	}
}

func TestDeleteAppHoldingDomainsIsAConflict(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "a", "acme")
	claim(t, f.w, "a", "a.example")
	var c *ErrConflict
	if err := f.w.DeleteApp(ctx, admin, "a", ""); !errors.As(err, &c) || !strings.Contains(c.Detail, "a.example") {
		t.Fatalf("delete: %v, want ErrConflict naming a.example", err)
	}
	if err := f.w.Release(ctx, admin, "a", "a.example", ""); err != nil {
		t.Fatal(err)
	}
	if err := f.w.DeleteApp(ctx, admin, "a", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.w.App(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v, want ErrNotFound", err)
	}
}

func TestAppTokensKeepTheirInstancesInTheAllocationRange(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	shop := f.app(t, "shop", "acme")
	tok := Actor{Token: fleet.TokenRecord{ID: "0123456789abcdef", Account: "acme", App: "shop", AppID: shop.ID, Roles: []string{fleet.RoleInstance}}}
	inst, created, err := f.w.AllocateInstance(ctx, tok, "shop")
	if err != nil || !created || inst.Port != 24000 || f.beats != 1 {
		t.Fatalf("allocate: %+v created=%v err=%v beats=%d", inst, created, err, f.beats)
	}
	var forb *ErrForbidden
	for _, p := range []int{22, 7400, 24010} {
		if _, err := f.w.SetInstance(ctx, tok, "shop", &p, true); !errors.As(err, &forb) {
			t.Errorf("port %d: %v, want ErrForbidden", p, err)
		}
	}
	p := 7400
	if _, err := f.w.SetInstance(ctx, admin, "shop", &p, true); err != nil {
		t.Fatalf("admin may set any port: %v", err)
	}
	if err := f.w.ReleaseInstance(ctx, tok, "shop"); err != nil {
		t.Fatal(err)
	}
	if err := f.w.ReleaseInstance(ctx, tok, "shop"); !errors.Is(err, ErrNoInstance) {
		t.Fatalf("second release: %v, want ErrNoInstance", err)
	}
}

func TestIssuedTokensAuthenticateUntilRevoked(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	if _, err := f.w.IssueToken(ctx, admin, "evil", "shop", []string{"publish"}); err == nil {
		t.Fatal("a token for another account's app was issued")
	}
	it, err := f.w.IssueToken(ctx, admin, "acme", "shop", []string{"publish", "publish"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.w.LookupToken(ctx, it.Token)
	if err != nil || rec.App != "shop" || len(rec.Roles) != 1 {
		t.Fatalf("lookup: %+v %v", rec, err)
	}
	if _, err := f.w.LookupToken(ctx, it.Token+"0"); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a wrong secret: %v, want ErrBadToken", err)
	}
	if err := f.w.RevokeToken(ctx, admin, it.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.w.LookupToken(ctx, it.Token); !errors.Is(err, ErrBadToken) {
		t.Fatalf("after revoke: %v, want ErrBadToken", err)
	}
}

func TestWritesNeverBumpAForeignSerial(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	obs, err := f.id.Observe(ctx, f.st)
	if err != nil {
		t.Fatal(err)
	}
	f.id.Commit(obs)
	// The store is replaced: another epoch, a larger counter.
	foreign := store.FormatSerial(obs.Serial+5, "00000000000000ff")
	if _, err := f.st.Put(ctx, fleet.KeySerial, foreign, store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Placement: []string{"vps-b"}}, ""); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write whose bump is refused: %v, want ErrUnavailable (503)", err)
	}
	if got := f.serial(t); got != string(foreign) {
		t.Fatalf("the foreign serial was bumped: %q -> %q", foreign, got)
	}
}

// TestAWriteWhoseBumpFailsIsNotAcknowledgedAndItsRetryConverges: a write whose serial
// bump fails (an unparseable serial) is answered 503 and not reported committed, and a
// token issued then is not left in the store (it was never shown). Once the serial is
// repaired, the client's retry of the same put finds nothing to write and must still
// announce the stored change (a later no-op bumps nothing), and so must the retry of a
// delete, which finds nothing to delete (404).
func TestAWriteWhoseBumpFailsIsNotAcknowledgedAndItsRetryConverges(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "shop", "acme")
	setSerial := func(v string) {
		t.Helper()
		if _, err := f.st.Put(ctx, fleet.KeySerial, []byte(v), store.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	put := func() error {
		_, _, _, err := f.w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Placement: []string{"vps-b"}}, "")
		return err
	}
	good := f.serial(t)
	setSerial("not a counter")
	if err := put(); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write over an unparseable serial: %v, want ErrUnavailable (503)", err)
	}
	if len(f.commits) != 1 {
		t.Fatalf("an unannounced change was reported committed: %v", f.commits)
	}
	if _, err := f.w.IssueToken(ctx, admin, "acme", "shop", []string{"publish"}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("issue over a broken serial: %v, want ErrUnavailable", err)
	}
	if es, _ := f.st.List(ctx, fleet.PrefixTokens); len(es) != 0 {
		t.Fatalf("a token never shown was left in the store: %v", es)
	}
	setSerial(good)
	if err := put(); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := f.serial(t); got == good {
		t.Fatalf("the retry did not bump the serial (still %q): the change is never published", got)
	}
	good = f.serial(t)
	if err := put(); err != nil || f.serial(t) != good {
		t.Fatalf("a later no-op bumped again (%q -> %q, %v)", good, f.serial(t), err)
	}
	setSerial("broken")
	if err := f.w.DeleteApp(ctx, admin, "shop", ""); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("delete over a broken serial: %v, want ErrUnavailable", err)
	}
	setSerial(good)
	if err := f.w.DeleteApp(ctx, admin, "shop", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retry: %v, want ErrNotFound", err)
	}
	if f.serial(t) == good {
		t.Fatal("the retried delete announced nothing: no node learns the app is gone")
	}
}

func TestARecreatedApplicationInheritsNoInstanceAndNoToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old := f.app(t, "shop", "acme")
	it, err := f.w.IssueToken(ctx, admin, "acme", "shop", []string{"instance", "publish"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.w.LookupToken(ctx, it.Token)
	if err != nil {
		t.Fatal(err)
	}
	oldInst, _, err := f.w.AllocateInstance(ctx, Actor{Token: tok}, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.w.DeleteApp(ctx, admin, "shop", ""); err != nil {
		t.Fatal(err)
	}
	if len(f.w.Instances()) != 0 {
		t.Fatalf("deleting the app left its instance on the node: %+v", f.w.Instances())
	}
	again := f.app(t, "shop", "acme")
	if again.ID == "" || again.ID == old.ID {
		t.Fatalf("the recreated app has id %q (old %q): want a new incarnation", again.ID, old.ID)
	}
	var forb *ErrForbidden
	if _, _, err := f.w.AllocateInstance(ctx, Actor{Token: tok}, "shop"); !errors.As(err, &forb) {
		t.Fatalf("the old incarnation's token: %v, want ErrForbidden", err)
	}
	inst, created, err := f.w.AllocateInstance(ctx, admin, "shop")
	if err != nil || !created || inst.Port == oldInst.Port {
		t.Fatalf("new instance %+v created=%v err=%v: want a new port, not the old owner's %d", inst, created, err, oldInst.Port)
	}
	p := oldInst.Port
	if _, err := f.w.SetInstance(ctx, admin, "shop", &p, true); !errors.Is(err, ErrPortTaken) {
		t.Fatalf("the old incarnation's quarantined port: %v, want ErrPortTaken", err)
	}
}

func TestOrphanedInstancesAreSweptAndTheAdminCanReleaseThem(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "a", "acme")
	f.app(t, "b", "acme")
	for _, app := range []string{"a", "b"} {
		allocate(t, f.w, admin, app)
	}
	// Another node deletes a: the object goes, this node's registry still holds it.
	if err := f.st.Delete(ctx, fleet.AppKey("a"), ""); err != nil {
		t.Fatal(err)
	}
	// A stale view that still lists a: the store is asked before anything goes.
	b, _, _ := f.w.App(ctx, "b")
	released, err := f.w.SweepOrphans(ctx, map[string]string{"b": b.ID})
	if err != nil || len(released) != 1 || released[0] != "a" {
		t.Fatalf("sweep released %v (%v), want [a]", released, err)
	}
	if got := f.w.Instances(); len(got) != 1 || got[0].App != "b" {
		t.Fatalf("after the sweep: %+v", got)
	}
	// An orphan the sweep has not reached yet: the admin releases it by name.
	allocate(t, f.w, admin, "b")
	if err := f.st.Delete(ctx, fleet.AppKey("b"), ""); err != nil {
		t.Fatal(err)
	}
	if err := f.w.ReleaseInstance(ctx, Actor{Token: fleet.TokenRecord{ID: "0123456789abcdef", App: "b", Account: "acme"}}, "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a token on a deleted app: %v, want ErrNotFound", err)
	}
	if err := f.w.ReleaseInstance(ctx, admin, "b"); err != nil {
		t.Fatalf("admin release of an orphan: %v", err)
	}
}

// hooks runs a test's hook before each Get and each Put reaches the store (another
// writer acting there, between two steps of a write, or a store failing); a hook's
// error is the call's answer.
type hooks struct {
	store.Store
	get, put func(key string) error
}

func (h *hooks) Get(ctx context.Context, key string) (store.Object, error) {
	if h.get != nil {
		if err := h.get(key); err != nil {
			return store.Object{}, err
		}
	}
	return h.Store.Get(ctx, key)
}

func (h *hooks) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	if h.put != nil {
		if err := h.put(key); err != nil {
			return "", err
		}
	}
	return h.Store.Put(ctx, key, v, c)
}

// readLog records, in order, the keys a store is asked to read (Get and GetIfChanged)
// and the prefixes it is asked to list.
type readLog struct {
	store.Store
	mu          sync.Mutex
	gets, lists []string
}

func (r *readLog) Get(ctx context.Context, key string) (store.Object, error) {
	r.log(&r.gets, key)
	return r.Store.Get(ctx, key)
}

func (r *readLog) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	r.log(&r.gets, key)
	return r.Store.GetIfChanged(ctx, key, etag)
}

func (r *readLog) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	r.log(&r.lists, prefix)
	return r.Store.List(ctx, prefix)
}

func (r *readLog) log(to *[]string, s string) {
	r.mu.Lock()
	*to = append(*to, s)
	r.mu.Unlock()
}

// take returns how many reads of a key starting with prefix, and which lists, were
// made since the last take, and forgets every read and list.
func (r *readLog) take(prefix string) (gets int, lists []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.gets {
		if strings.HasPrefix(k, prefix) {
			gets++
		}
	}
	lists, r.gets, r.lists = r.lists, nil, nil
	return gets, lists
}

func TestAuditReadsNewestFirstWithoutListingEverythingAndRetentionDeletes(t *testing.T) {
	f := newFixture(t)
	f.w.cfg.AuditRetention = 30 * 24 * time.Hour
	ctx := context.Background()
	day := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
	for _, at := range []time.Time{day(1).Add(11*time.Hour + 59*time.Minute), day(2).Add(-11*time.Hour - 59*time.Minute), day(27), day(28), day(29), day(30)} { // one record a day
		f.w.now = func() time.Time { return at }
		putApp(t, f.w, fmt.Sprintf("app%d", at.Day()), fleet.App{Account: "acme"}, "")
	}
	lc := &readLog{Store: f.st}
	f.w.st = lc
	f.w.now = func() time.Time { return day(30).Add(time.Hour) }
	recs, err := f.w.Audit(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].App != "app30" || recs[1].App != "app29" {
		t.Fatalf("audit: %+v, want app30 then app29", recs)
	}
	if _, lists := lc.take(""); len(lists) != 2 || lists[0] != "audit/20261130/" {
		t.Fatalf("audit listed %v: want today's and yesterday's segments only", lists)
	}
	// Swept on Dec 2 at 13:00, the cutoff is Nov 2: its record of 00:01 stays, Nov 1's of
	// 23:59 goes (an off-by-one-day sweep fails one way or the other).
	f.w.now = func() time.Time { return day(30).Add(49 * time.Hour) }
	n, err := f.w.SweepAudit(ctx, f.w.now())
	if err != nil || n != 1 {
		t.Fatalf("sweep deleted %d (%v), want the one record of Nov 1", n, err)
	}
	recs, _ = f.w.Audit(ctx, 100)
	if len(recs) != 5 || recs[3].App != "app27" || recs[4].App != "app2" {
		t.Fatalf("after the sweep: %+v, want Nov 2's record kept (the cutoff day)", recs)
	}
}

// TestClaimsAreExclusiveAcrossAccountsByCoverage: a claim is create-only across
// applications (idempotent for its holder), and across accounts by coverage: no
// wildcard over another account's name, no name under another account's wildcard;
// each refusal an ErrConflict naming the holder.
func TestClaimsAreExclusiveAcrossAccountsByCoverage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "web", "bank")
	f.app(t, "bank2", "bank")
	f.app(t, "evil", "evil")
	if _, _, created, err := f.w.Claim(ctx, admin, "web", "www.bank.example"); err != nil || !created {
		t.Fatalf("claim: created=%v err=%v", created, err)
	}
	if _, _, created, err := f.w.Claim(ctx, admin, "web", "www.bank.example"); err != nil || created {
		t.Fatalf("re-claim by the holder: created=%v err=%v (want idempotent)", created, err)
	}
	claim(t, f.w, "evil", "*.evil.example")
	var c *ErrConflict
	for _, tc := range []struct{ app, host, holder string }{
		{"bank2", "www.bank.example", "web"}, // another application of the account
		{"evil", "*.bank.example", "web"},    // a wildcard over another account's name
		{"web", "shop.evil.example", "evil"}, // a name under another account's wildcard
		{"evil", "www.bank.example", "web"},  // the name itself
	} {
		if _, _, _, err := f.w.Claim(ctx, admin, tc.app, tc.host); !errors.As(err, &c) || c.Holder != tc.holder {
			t.Errorf("%s claims %s: %v, want ErrConflict naming %s", tc.app, tc.host, err, tc.holder)
		}
	}
	// The same account may put a wildcard over its own names.
	if _, _, _, err := f.w.Claim(ctx, admin, "bank2", "*.bank.example"); err != nil {
		t.Fatalf("a wildcard over the account's own name: %v", err)
	}
	// An unreadable claim object: its holder is unknown, nobody claims over it.
	if _, err := f.st.Put(ctx, fleet.ClaimKey("lost.example.org"), []byte("{not json"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := f.w.Claim(ctx, admin, "evil", "*.example.org"); !errors.As(err, &c) {
		t.Fatalf("a wildcard over an unreadable claim: %v, want ErrConflict", err)
	}
}

func TestRacingOverlappingClaimsNeverBothStand(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.app(t, "bank", "bank")
	f.app(t, "evil", "evil")
	// evil's overlapping claim lands between bank's check and its write.
	raced := false
	f.w.st = &hooks{Store: f.st, put: func(key string) error {
		if key != fleet.ClaimKey("www.bank.example") || raced {
			return nil
		}
		raced = true
		_, err := f.st.Put(ctx, fleet.ClaimKey("*.bank.example"), []byte(`{"host":"*.bank.example","account":"evil","app":"evil"}`), store.Condition{IfNoneMatch: true})
		return err
	}}
	var c *ErrConflict
	if _, _, _, err := f.w.Claim(ctx, admin, "bank", "www.bank.example"); !errors.As(err, &c) {
		t.Fatalf("a claim raced by an overlapping one: %v, want ErrConflict", err)
	}
	if _, err := f.st.Get(ctx, fleet.ClaimKey("www.bank.example")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the claim that lost the race was left standing (%v)", err)
	}
}

// claim, allocate and putApp are setup steps of w as the admin (allocate: as who); each
// fails t if w refuses.
func claim(t *testing.T, w *Writer, app, host string) {
	t.Helper()
	if _, _, _, err := w.Claim(context.Background(), admin, app, host); err != nil {
		t.Fatal(err)
	}
}

func allocate(t *testing.T, w *Writer, who Actor, app string) {
	t.Helper()
	if _, _, err := w.AllocateInstance(context.Background(), who, app); err != nil {
		t.Fatal(err)
	}
}

func putApp(t *testing.T, w *Writer, name string, a fleet.App, ifMatch string) {
	t.Helper()
	if _, _, _, err := w.PutApp(context.Background(), admin, name, a, ifMatch); err != nil {
		t.Fatal(err)
	}
}
