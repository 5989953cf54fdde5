package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// A routable generated fleet: N applications whose instances are loopback listeners that
// answer, so that a real Traefik can route to them and a flip can be observed by who
// answers. Issue 13 item 5 measures flips on it; issue 17 item 5 (groups) reuses it with a
// group per application.
//
// Shape (flipFleet):
//
//   - applications app-00000…, accounts acct-000…acct-099 round-robin, placed on two of
//     the fake nodes in rotating order (a failover chain of two leaves: the first is
//     actively checked, the last is not, as the render does), every other one with a
//     health path;
//   - the flip participants: app-00000 (the flip host's own application) and
//     app-00001, app-00002 (the targets) are all in acct-000, so a path map on the flip
//     host may point at either; each of their instances has a listener of its own that
//     answers "<app>@<node>", every other instance shares one of a few pool listeners
//     that answer "ok" (health checks included);
//   - flipHost (claimed by app-00000) with one prefix, flipPrefix, on app-00001;
//   - every 10th application claims "<app>.example.org";
//   - the fake nodes (fleetNodeNames) are records written by the harness, address
//     127.0.0.1, API port one of the pool listeners (so node-delegated health checks are
//     answered 200). Their heartbeats are dated a day ahead, so they never go stale
//     during a run whatever the node's TTL: the fleet's liveness traffic is not what is
//     measured here, and an old node (which re-reads node records only on a serial bump)
//     sees them as fresh too.
const (
	flipHost   = "flip.example.org"
	flipPrefix = "b"
	flipOwner  = "app-00000"
	// flipAccount holds the flip participants.
	flipAccount = "acct-000"
)

// flipTargets are the two applications a flip alternates between.
var flipTargets = [2]string{"app-00001", "app-00002"}

// fleetNodeNames are the fake nodes the generated applications run on.
var fleetNodeNames = []string{"fleet-a", "fleet-b", "fleet-c"}

// poolListeners is how many shared "ok" listeners the rest of the fleet points at.
const poolListeners = 8

// fleetSpec describes one generated, routable fleet.
type fleetSpec struct {
	apps int
	// group, when set, puts application i in ingress group group(i): written as
	// "ingress": {"group": …} in its object (the shape issue 17 proposes; a node that
	// does not know groups ignores the field, as it does every unknown field on read).
	group func(i int) string
}

// fleetBackends are the loopback listeners a generated fleet's instances point at.
type fleetBackends struct {
	pool []int // answer "ok" to everything
	// identity maps "<app>@<node>" to the port of its own listener.
	identity map[string]int
}

// identityName is what an instance of app on node answers.
func identityName(app, node string) string { return app + "@" + node }

// appName is the generated name of application i.
func appName(i int) string { return fmt.Sprintf("app-%05d", i) }

// placementOf is application i's placement: two fake nodes in rotating order.
func placementOf(i int) []string {
	n := len(fleetNodeNames)
	return []string{fleetNodeNames[i%n], fleetNodeNames[(i+1)%n]}
}

// isFlipParticipant reports whether application i answers with its own identity.
func isFlipParticipant(i int) bool { return i <= 2 }

// startFleetBackends starts the pool and the flip participants' identity listeners, in
// this process, on 127.0.0.1; they close when the task ends.
func startFleetBackends(t *task) *fleetBackends {
	b := &fleetBackends{identity: map[string]int{}}
	for range poolListeners {
		b.pool = append(b.pool, serveText(t, "ok"))
	}
	for i := 0; isFlipParticipant(i); i++ {
		for _, n := range placementOf(i) {
			name := identityName(appName(i), n)
			b.identity[name] = serveText(t, name)
		}
	}
	return b
}

// serveText starts an HTTP server on a free loopback port answering body to every
// request, and returns the port.
func serveText(t *task, body string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(body))
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// benchNodeTTL is the bench nodes' reconcile.nodeTTL (newNode): the generated node
// records never heartbeat, so they are dated when generated and stay live for a day. A
// record dated ahead instead would not be: beyond the TTL ahead of a node's clock a
// record is not live (fleet.NodeLive).
const benchNodeTTL = 24 * time.Hour

// fleetObjects builds the store objects of spec on backends: key → JSON.
func fleetObjects(spec fleetSpec, b *fleetBackends, now time.Time) (map[string][]byte, error) {
	if spec.apps < 3 {
		return nil, fmt.Errorf("a flip fleet needs at least 3 applications, got %d", spec.apps)
	}
	objs := map[string][]byte{}
	nodes := map[string]*fleet.NodeRecord{}
	for k, name := range fleetNodeNames {
		nodes[name] = &fleet.NodeRecord{
			Name: name, Address: "127.0.0.1", APIPort: b.pool[k%len(b.pool)],
			Instances: map[string]fleet.Instance{},
			Seen:      now,
		}
	}
	for i := range spec.apps {
		name := appName(i)
		account := fmt.Sprintf("acct-%03d", i%100)
		if isFlipParticipant(i) {
			account = flipAccount
		}
		app := fleet.App{Name: name, Account: account, Placement: placementOf(i)}
		if i%2 == 0 {
			app.Health = &fleet.Health{Path: "/healthz"}
		}
		for j, n := range app.Placement {
			port := b.pool[(i*2+j)%len(b.pool)]
			if isFlipParticipant(i) {
				port = b.identity[identityName(name, n)]
			}
			nodes[n].Instances[name] = fleet.Instance{Port: port, Ready: true}
		}
		raw, err := appJSON(app, spec, i)
		if err != nil {
			return nil, err
		}
		objs[fleet.AppKey(name)] = raw
		if i%10 == 0 && i > 0 {
			c, _ := json.Marshal(fleet.Claim{Host: name + ".example.org", Account: account, App: name})
			objs[fleet.ClaimKey(name+".example.org")] = c
		}
	}
	c, _ := json.Marshal(fleet.Claim{Host: flipHost, Account: flipAccount, App: flipOwner,
		Paths: map[string]string{flipPrefix: flipTargets[0] + "." + platformDomain}})
	objs[fleet.ClaimKey(flipHost)] = c
	for _, n := range nodes {
		raw, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		objs[fleet.NodeKey(n.Name)] = raw
	}
	return objs, nil
}

// appJSON is an application's object, with its group when the spec has one.
func appJSON(app fleet.App, spec fleetSpec, i int) ([]byte, error) {
	raw, err := json.Marshal(app)
	if err != nil || spec.group == nil {
		return raw, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m["ingress"] = map[string]any{"group": spec.group(i)}
	return json.Marshal(m)
}

// writeFlipFleet writes spec's objects into the dir store at root and bumps the serial
// once (unnamed: a node reads everything).
func writeFlipFleet(t *task, root string, spec fleetSpec, b *fleetBackends) {
	objs, err := fleetObjects(spec, b, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	st, err := dir.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for k, v := range objs {
		if _, err := st.Put(ctx, k, v, store.Condition{}); err != nil {
			t.Fatalf("writing %s: %v", k, err)
		}
	}
	if _, err := store.BumpSerial(ctx, st); err != nil {
		t.Fatal(err)
	}
}
