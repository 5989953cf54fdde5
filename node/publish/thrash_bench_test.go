package publish

import (
	"fmt"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// BenchmarkPollUnderThrash is issue 25 item 8's cost: a real ingress's poll of the
// every-group Traefik output of a 1 000-application fleet (eight ingress groups), alone
// and while an ingress-token holder cycles 900 distinct (prefer × groups) selections,
// 300 between two real polls, each polled twice. poll-ns is the real poll alone (the
// thrasher's polls are not timed); renders/poll how many of the real polls rendered
// their body again (render, gzip, hash, spill). It uses only what the publisher had
// before the thrash-resistant caches, so it runs on the old code too.
func BenchmarkPollUnderThrash(b *testing.B) {
	for _, thrasher := range []bool{false, true} {
		b.Run(fmt.Sprintf("thrasher=%v", thrasher), func(b *testing.B) {
			_, _, _, doc := thrashFleet(1000)
			p := newPublisher(render.Options{}, b.TempDir())
			p.Publish(doc, time.Now())
			s := p.cur.Load()
			poll := func(prefer string, groups []string) {
				if _, err := p.Body(s, Request{Prefer: prefer, Format: api.FormatTraefik, Groups: groups}); err != nil {
					b.Fatal(err)
				}
			}
			for range 10 { // the real ingress polled before the thrasher came
				poll("", nil)
			}
			sel := thrashSelections(900)
			var polling time.Duration
			renders, n := int64(0), 0
			for b.Loop() {
				r0, t0 := p.Renders(), time.Now()
				poll("", nil)
				polling += time.Since(t0)
				renders += p.Renders() - r0
				if thrasher {
					for i := range 300 {
						q := sel[(n*300+i)%len(sel)]
						poll(q.prefer, q.groups)
						poll(q.prefer, q.groups)
					}
				}
				n++
			}
			b.ReportMetric(float64(polling.Nanoseconds())/float64(n), "poll-ns")
			b.ReportMetric(float64(renders)/float64(n), "renders/poll")
		})
	}
}

// thrashFleet is a small generated fleet with eight ingress groups g0…g7 (an eighth of
// the applications each, a ninth of them in none), its options and a deriver that
// derived it.
func thrashFleet(apps int) (fleet.State, fleet.Options, *fleet.Deriver, *routing.Document) {
	st, fo := fleet.GenerateState(apps, 0), fleet.GenerateOptions()
	for g := range 8 {
		fleet.GenerateGroup(&st, &fo, fmt.Sprintf("g%d", g), fmt.Sprintf("g%d.example.com", g), func(i int) bool { return i%9 == g })
	}
	x := &fleet.Deriver{}
	doc, _, _ := x.Derive(st, fo, nil)
	return st, fo, x, doc
}

// thrashSelections are n distinct (prefer, groups) selections: every prefer × every
// non-empty subset of g0…g7, sorted as the handler sorts them.
func thrashSelections(n int) []struct {
	prefer string
	groups []string
} {
	var out []struct {
		prefer string
		groups []string
	}
	for _, prefer := range []string{"", "vps-a", "vps-b", "vps-c"} {
		for set := 1; set < 256 && len(out) < n; set++ {
			var gs []string
			for g := range 8 {
				if set&(1<<g) != 0 {
					gs = append(gs, fmt.Sprintf("g%d", g))
				}
			}
			out = append(out, struct {
				prefer string
				groups []string
			}{prefer, gs})
		}
	}
	return out
}

// BenchmarkPollUnderBusierThrash is BenchmarkPollUnderThrash with each poll's source:
// the real ingress tracked under its address, and the thrasher under one other address
// polling 300 selections three times each between two real polls (the busier thrasher
// the hostile round measured). poll-ns is the real poll alone; renders/poll how many real
// polls rendered.
func BenchmarkPollUnderBusierThrash(b *testing.B) {
	for _, thrasher := range []bool{false, true} {
		b.Run(fmt.Sprintf("thrasher=%v", thrasher), func(b *testing.B) {
			_, _, _, doc := thrashFleet(1000)
			p := newPublisher(render.Options{}, b.TempDir())
			p.Publish(doc, time.Now())
			s := p.cur.Load()
			poll := func(source, prefer string, groups []string) {
				if _, err := p.Body(s, Request{Ingress: source, Prefer: prefer, Format: api.FormatTraefik, Groups: groups}); err != nil {
					b.Fatal(err)
				}
			}
			for range 10 { // the real ingress polled before the thrasher came
				poll("10.1.0.1", "", nil)
			}
			sel := thrashSelections(300)
			var polling time.Duration
			renders, n := int64(0), 0
			for b.Loop() {
				r0, t0 := p.Renders(), time.Now()
				poll("10.1.0.1", "", nil)
				polling += time.Since(t0)
				renders += p.Renders() - r0
				if thrasher {
					for range 3 {
						for _, q := range sel {
							poll("10.9.0.9", q.prefer, q.groups)
						}
					}
				}
				n++
			}
			b.ReportMetric(float64(polling.Nanoseconds())/float64(n), "poll-ns")
			b.ReportMetric(float64(renders)/float64(n), "renders/poll")
		})
	}
}
