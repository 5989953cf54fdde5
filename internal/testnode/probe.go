package testnode

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// ProbeConfig is Config with probes on, fast: a probe every 50ms, down after 2
// failures, up after 2 successes.
func ProbeConfig(t testing.TB, name, storeDir string) *node.Config {
	t.Helper()
	cfg := Config(t, name, storeDir)
	cfg.Probe = node.ProbeConfig{Interval: ptypes.Duration(50 * time.Millisecond), Timeout: ptypes.Duration(40 * time.Millisecond),
		DownAfter: 2, UpAfter: 2, Concurrency: 8}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// RecordReady reads whether node name's stored record publishes app's instance ready.
func RecordReady(t testing.TB, st store.Store, name, app string) bool {
	t.Helper()
	o, err := st.Get(context.Background(), fleet.NodeKey(name))
	if err != nil {
		t.Fatal(err)
	}
	var rec fleet.NodeRecord
	if err := json.Unmarshal(o.Value, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Instances[app].Ready
}
