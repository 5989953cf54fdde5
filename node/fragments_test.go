package node

import (
	"bytes"
	"testing"
	"time"

	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// TestPublisherServesTheFullRenderAcrossRevisions: the publisher renders the Traefik
// format with per-application fragments kept across revisions; what it serves, for
// every revision and prefer, is byte for byte the full render of that document.
func TestPublisherServesTheFullRenderAcrossRevisions(t *testing.T) {
	opts := render.Options{HealthCheckTimeout: "3s"}
	p := newPublisher(opts, t.TempDir())
	st := fleet.GenerateState(300, 200)
	fo := fleet.GenerateOptions()
	for step := range 6 {
		// Each revision moves one instance and takes one application off a node.
		st.Nodes[step%3].Instances[st.Apps[step].Name] = fleet.Instance{Port: 50000 + step, Ready: true}
		delete(st.Nodes[(step+1)%3].Instances, st.Apps[10+step].Name)
		doc, _ := fleet.Derive(st, fo)
		if !p.publish(doc, time.Now()) {
			t.Fatalf("step %d: the revision did not move", step)
		}
		s := p.cur.Load()
		for _, prefer := range []string{"", "vps-a", "vps-c"} {
			got, err := p.get(s, prefer, formatTraefik)
			if err != nil {
				t.Fatal(err)
			}
			d := doc
			if prefer != "" {
				d = mustPrefer(t, doc, prefer)
			}
			want, err := render.Traefik(d, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.body, want) {
				t.Fatalf("step %d prefer %q: served bytes differ from the full render", step, prefer)
			}
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
