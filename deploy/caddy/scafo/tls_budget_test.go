package scafo

import (
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/scafo/ingress/node/fleetcerts/pebbletest"
)

// The issuance budget through a real Caddy on the shipped Caddyfile, against Pebble
// with validation on, the storage through the node: with `budget 1`, the first
// certificate-less document name is ordered; a second one is refused (the handshake
// fails, Pebble has no order for it). A Caddy started afresh (empty memory, a fresh
// window) approves the first name again without spending its budget, because the
// fleet store (read through the node) holds its certificate, and so still has the one
// approval for the second name, which is then ordered. Without the storage check the
// first name would spend it and the second would be refused.
func TestOnDemandTLSBudgetHoldsBackOnlyNamesWithNoCertificate(t *testing.T) {
	f := startRoutingFleet(t)
	httpPort := freePort(t)
	peb := pebbletest.Start(t, pebbletest.Config{HTTPPort: httpPort})
	budget1 := func(m map[string]any) {
		pebbleIssuer(t, peb)(m)
		od := m["apps"].(map[string]any)["tls"].(map[string]any)["automation"].(map[string]any)["on_demand"].(map[string]any)
		perm := od["permission"].(map[string]any)
		if perm["module"] != "scafo" {
			t.Fatalf("the shipped on_demand permission is %v", perm)
		}
		perm["budget"] = 1
	}
	c := startShippedCaddyOn(t, f.node.url, httpPort, t.TempDir(), budget1)
	waitTable(t, activePoller(t), "the node's revision", func(tab *Table) bool { return tab.Doc.Revision == f.doc.Revision })
	roots := peb.IssuerRoot(t)
	handshake := func(name string) (string, error) {
		conn, err := tlsHandshake(c.httpsAddr, name, roots)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}

	first, err := handshake("go.tito.io")
	if err != nil {
		t.Fatalf("go.tito.io: %v\nPebble: %s", err, peb.Log())
	}
	if _, err := handshake("ti.to"); err == nil {
		t.Fatal("ti.to: the handshake succeeded with the budget of 1 spent")
	}
	if o, i := peb.Orders(), len(peb.Issued()); o != 1 || i != 1 {
		t.Fatalf("Pebble: %d orders, %d issued; want 1 and 1 (the second name held back)", o, i)
	}

	// A fresh Caddy: go.tito.io holds a certificate in the fleet store, so it is
	// approved without spending; the one approval goes to ti.to.
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
	c2 := startShippedCaddyOn(t, f.node.url, httpPort, t.TempDir(), budget1)
	waitTable(t, activePoller(t), "the node's revision", func(tab *Table) bool { return tab.Doc.Revision == f.doc.Revision })
	c.httpsAddr = c2.httpsAddr
	again, err := handshake("go.tito.io")
	if err != nil || again != first {
		t.Fatalf("fresh Caddy, go.tito.io: serial %s, %v; want %s loaded from the store", again, err, first)
	}
	if _, err := handshake("ti.to"); err != nil {
		t.Fatalf("fresh Caddy, ti.to: %v (go.tito.io, holding a certificate, spent the budget?)\nPebble: %s", err, peb.Log())
	}
	if _, err := handshake("shop.apps.example.com"); err == nil {
		t.Fatal("fresh Caddy, shop.apps.example.com: approved with the budget spent")
	}
	if o, i := peb.Orders(), len(peb.Issued()); o != 2 || i != 2 {
		t.Fatalf("Pebble: %d orders, %d issued; want 2 and 2", o, i)
	}
}
