package fleet

import (
	"fmt"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// BenchmarkDerive derives (and seals) GenerateState fleets of 1k and 10k applications
// with 10k prefixes on one host; Marshal is measured separately.
func BenchmarkDerive(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		st := GenerateState(n, 10000)
		opt := GenerateOptions()
		d, _ := Derive(st, opt)
		b.Run(fmt.Sprintf("apps=%d/routes=%d/prefixes=10000", n, len(d.Routes)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Derive(st, opt)
			}
		})
		b.Run(fmt.Sprintf("apps=%d/routes=%d/prefixes=10000/marshal", n, len(d.Routes)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := routing.Marshal(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
