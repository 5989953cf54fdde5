package fleetwrite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// slowStore is a store whose calls take real time and honour cancellation, as
// minio-go's do over a network round trip: a call whose context ends first fails with
// the context's error, wrapped the way the S3 backend wraps it (store.ErrUnavailable
// and the cause), and changes nothing.
type slowStore struct {
	store.Store
	delay time.Duration
}

func (s *slowStore) wait(ctx context.Context) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("s3 store: %w: %w", store.ErrUnavailable, ctx.Err())
	case <-t.C:
		return nil
	}
}

func (s *slowStore) Get(ctx context.Context, key string) (store.Object, error) {
	if err := s.wait(ctx); err != nil {
		return store.Object{}, err
	}
	return s.Store.Get(ctx, key)
}

func (s *slowStore) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	if err := s.wait(ctx); err != nil {
		return store.Object{}, false, err
	}
	return s.Store.GetIfChanged(ctx, key, etag)
}

func (s *slowStore) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	return s.Store.Put(ctx, key, v, c)
}

func (s *slowStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix)
}

// cancelledAfter is a context its "client" cancels d after the call starts: a request
// half-closed one store round trip after it was sent.
func cancelledAfter(d time.Duration) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(d, cancel)
	return ctx
}

// TestAClientsCancellationDoesNotFailTheTokenKeyLoad: the first token check on a node
// loads the MAC key. A client that cancels its request during that load must not fail
// it: the next made-up token, from anyone, is refused without a store read (TokenForged),
// not checked by a budgeted lookup for macRetry (TokenNoKey).
func TestAClientsCancellationDoesNotFailTheTokenKeyLoad(t *testing.T) {
	f := newFixture(t)
	f.app(t, "shop", "acme")
	if _, err := f.w.issueKey(context.Background()); err != nil { // the fleet has a key (another node made it)
		t.Fatal(err)
	}
	slow := &slowStore{Store: f.st, delay: 20 * time.Millisecond}
	w := f.peer(t, slow) // a node just started: no key cached
	// The client gives up halfway through the key's read (cancelled before it even
	// starts, the harshest case: the store call returns at once).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = w.CheckToken(ctx, forged())
	_ = w.CheckToken(cancelledAfter(5*time.Millisecond), forged())
	if got := w.CheckToken(context.Background(), forged()); got != TokenForged {
		t.Fatalf("after a client's cancellation during the key's load, a made-up token is %v, want TokenForged (%v): the MAC check was switched off", got, TokenForged)
	}
}

// TestACancelledChargeRefusesTheChange: a routing change whose budget charge cannot be
// made because the caller left is refused and writes nothing; only a store error the
// node observed itself lets a change through.
func TestACancelledChargeRefusesTheChange(t *testing.T) {
	bf := newBudgetFixture(t, 1, 1, 6)
	w := bf.ws[0]
	ctx := context.Background()
	shop, _, _, err := w.PutApp(ctx, admin, "shop", fleet.App{Account: "acme", Placement: []string{"vps-a"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenFor(shop)
	// Spend the one change the account has.
	if _, err := w.chargeRoute(ctx, tok, "acme", "instance"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.chargeRoute(ctx, tok, "acme", "instance"); !isBudget(err) {
		t.Fatalf("second charge: %v, want the budget refusal", err)
	}
	w.st = &slowStore{Store: bf.st, delay: 20 * time.Millisecond}
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{
		{"cancelled before the charge", func() context.Context { c, cancel := context.WithCancel(ctx); cancel(); return c }()},
		{"cancelled one round trip into it", cancelledAfter(10 * time.Millisecond)},
	} {
		refund, err := w.chargeRoute(c.ctx, tok, "acme", "instance")
		if err == nil || refund != nil {
			t.Errorf("%s: charge let through (err %v): a tenant past its budget could flip by cancelling", c.name, err)
		} else if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want an error that is a cancellation", c.name, err)
		}
	}
	// A store the node itself cannot reach still lets the change through (no node
	// publishes while it is down: nothing to bound).
	w.st = &hooks{Store: bf.st, get: func(string) error { return fmt.Errorf("s3 store: %w: connection refused", store.ErrUnavailable) }}
	if refund, err := w.chargeRoute(ctx, tok, "acme", "instance"); err != nil || refund == nil {
		t.Fatalf("store outage: refund %v, err %v; want the change let through", refund != nil, err)
	}
}
