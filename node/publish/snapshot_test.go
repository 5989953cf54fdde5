package publish

import (
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// TestConcurrentPollsOfANewRevisionRenderOnce: N pollers waking on one revision change
// cost one render per (revision, prefer, format), not N.
func TestConcurrentPollsOfANewRevisionRenderOnce(t *testing.T) {
	p := newPublisher(render.Options{}, t.TempDir())
	doc, _ := fleet.Derive(fleet.GenerateState(2000, 1000), fleet.GenerateOptions())
	p.Publish(doc, time.Now())
	s := p.cur.Load()
	var wg sync.WaitGroup
	bodies := make([][]byte, 64)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Body(s, Request{Prefer: "", Format: api.FormatTraefik})
			if err != nil {
				t.Error(err)
				return
			}
			bodies[i] = r.body
		}()
	}
	wg.Wait()
	if n := p.renders.Load(); n != 1 {
		t.Fatalf("%d renders for 64 concurrent polls of one key, want 1", n)
	}
	for i := range bodies {
		if string(bodies[i]) != string(bodies[0]) || len(bodies[i]) == 0 {
			t.Fatal("pollers got different bodies")
		}
	}
}
