package testnode

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// TokenReads is a fleet store that counts what checking application tokens costs it:
// reads of token records (Records), of the tokens' MAC key (Key), and LISTs of the
// tokens (Lists).
type TokenReads struct {
	store.Store
	Records, Key, Lists atomic.Int64
}

func (c *TokenReads) note(key string) {
	switch {
	case strings.HasPrefix(key, fleet.PrefixTokens):
		c.Records.Add(1)
	case key == fleetwrite.TokenMACKey:
		c.Key.Add(1)
	}
}

func (c *TokenReads) Get(ctx context.Context, key string) (store.Object, error) {
	c.note(key)
	return c.Store.Get(ctx, key)
}

func (c *TokenReads) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	c.note(key)
	return c.Store.GetIfChanged(ctx, key, etag)
}

func (c *TokenReads) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if prefix == fleet.PrefixTokens {
		c.Lists.Add(1)
	}
	return c.Store.List(ctx, prefix)
}

// StartCountingTokens runs a ready node ("vps-a", each mut applied to its Config) over a
// directory store whose token reads it counts.
func StartCountingTokens(t testing.TB, mut ...func(*node.Config)) (*Node, *TokenReads) {
	t.Helper()
	cfg := Config(t, "vps-a", t.TempDir())
	for _, m := range mut {
		m(cfg)
	}
	return StartWrapped(t, cfg, func(d *dir.Store) *TokenReads { return &TokenReads{Store: d} })
}

// StartWrapped runs a ready node over the directory store at cfg.Store.Dir.Path as wrap
// wraps it (a store that counts or fails some calls), and returns the wrapper too.
func StartWrapped[S store.Store](t testing.TB, cfg *node.Config, wrap func(*dir.Store) S) (*Node, S) {
	t.Helper()
	inner, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	st := wrap(inner)
	n := StartWithStore(t, cfg, st)
	n.WaitReady()
	return n, st
}
