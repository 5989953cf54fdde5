package node_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

// TestAOneStepChangeIsPatchedAndServedLikeAFullRender: a node that reads one changed
// object (its own record, after an instance moved) patches the last document
// (fleet.Deriver) and renders the default output from its last body
// (render.Incremental.Render with a Delta), for every prefer and group selection it serves
// (the selection's document patched with routing.ForGroupsDelta); what it serves is byte
// for byte the full render of the document it publishes.
func TestAOneStepChangeIsPatchedAndServedLikeAFullRender(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	for i, app := range []string{"shop", "blog", "wiki"} {
		n.Must(201, "PUT", "/v1/apps/"+app, testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
		n.Must(200, "PUT", "/v1/node/instances/"+app, testAdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, 25000+i))
	}
	served := func(want string) []byte {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, body := n.Get("/v1/ingress/traefik", testIngressToken)
			if bytes.Contains(body, []byte(want)) {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("the configuration never held %q: %s", want, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	served("127.0.0.1:25002")
	p := n.Srv.Pub()
	sel := []string{routing.DefaultGroup}
	for _, prefer := range []string{"", "vps-a"} { // the bodies the next revisions build on
		if _, err := p.Body(p.Current(), publish.Request{Prefer: prefer, Format: api.FormatTraefik}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Body(p.Current(), publish.Request{Prefer: prefer, Format: api.FormatTraefik, Groups: sel}); err != nil {
			t.Fatal(err)
		}
	}
	// A step is one bump the node reads alone: its pass patches. A pass that reads more
	// than one bump (another write came between) reads the whole store and derives whole,
	// which is right but not what is tested: such a step is tried again with a new port,
	// at most twice. A step of one bump derived whole fails at once. (A step derived
	// whole was seen once, in a run of the package beside a CI run, before the failure
	// printed the serials; 150 runs under load did not repeat it.)
	port := 26001
	for step := range 3 {
		var s *publish.Snapshot
		for try := 0; ; try++ {
			port += 1000
			before, _, _ := p.Current().Mark()
			n.Must(200, "PUT", "/v1/node/instances/blog?force=true", testAdminToken, fmt.Sprintf(`{"port":%d,"ready":true}`, port)) // nothing listens: forced
			served(fmt.Sprintf("127.0.0.1:%d", port))
			s = p.Current() // the snapshot a later pass may replace: its own bytes are compared
			if s.Patched() {
				break
			}
			after, _, _ := s.Mark()
			if after <= before+1 || try == 2 {
				t.Fatalf("step %d try %d: the document was derived whole, not patched (serial %d -> %d)\n%s", step, try, before, after, n.Logs.String())
			}
			t.Logf("step %d try %d: derived whole after %d bumps; trying again", step, try, after-before)
		}
		for _, prefer := range []string{"", "vps-a"} {
			got, err := p.Body(s, publish.Request{Prefer: prefer, Format: api.FormatTraefik})
			if err != nil {
				t.Fatal(err)
			}
			want, err := render.Traefik(mustPrefer(t, s.Doc(), prefer), p.RenderOptions())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body(), want) {
				t.Fatalf("step %d prefer %q: served bytes differ from the full render\nserved: %s\nfull:   %s", step, prefer, got.Body(), want)
			}
			// The ?group= output: its selection is patched too, and served as rendered whole.
			got, err = p.Body(s, publish.Request{Prefer: prefer, Format: api.FormatTraefik, Groups: sel})
			if err != nil {
				t.Fatal(err)
			}
			want, err = render.TraefikGroups(mustPrefer(t, routing.ForGroups(s.Doc(), sel), prefer), p.RenderOptions(), sel, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body(), want) {
				t.Fatalf("step %d prefer %q: served group bytes differ from the full render\nserved: %s\nfull:   %s", step, prefer, got.Body(), want)
			}
		}
		if !s.GroupsPatched(sel) {
			t.Fatalf("step %d: the group selection was made whole, not patched", step)
		}
	}
}

func mustPrefer(t *testing.T, doc *routing.Document, node string) *routing.Document {
	t.Helper()
	d, err := routing.Prefer(doc, node)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
