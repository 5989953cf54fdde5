package certstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
)

// The adapter's cost over the bare store (dir backend, a 4 KiB and a 64 KiB value): the
// envelope (a header line and a SHA-256 on every write and read) and the key mapping.
// Compare each Storage row with its bare-store row.
func BenchmarkLoadStore(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		value := make([]byte, size)
		for i := range value {
			value[i] = byte(i)
		}
		st, err := dir.New(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		s := New(st, quietOpts(Options{}))
		ctx := context.Background()
		key := "certificates/acme-v02.api.letsencrypt.org-directory/example.com/example.com.crt"
		if err := s.Store(ctx, key, value); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Put(ctx, "bare/example.com.crt", value, store.Condition{}); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Load/%dKiB/Storage", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := s.Load(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("Load/%dKiB/bare", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := st.Get(ctx, "bare/example.com.crt"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("Store/%dKiB/Storage", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := s.Store(ctx, key, value); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("Store/%dKiB/bare", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := st.Put(ctx, "bare/example.com.crt", value, store.Condition{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
