package node_test

import (
	"strings"
	"testing"
)

// TestConfigRefusesValuesNoFleetMeans: values that parse but mean nothing a fleet
// wants stop the node, each naming its setting (issue 39 items 6 and 7); the values
// beside them that a fleet does use are accepted.
func TestConfigRefusesValuesNoFleetMeans(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" accepted
	}{
		{[]string{"--listen=127.0.0.1:24500", "--node.apiPort=7410"}, `listen "127.0.0.1:24500": port 24500 is inside ports.min..ports.max`},
		{[]string{"--listen=127.0.0.1:7410", "--node.apiPort=7410"}, ""},
		{[]string{"--writes.rate=NaN"}, "writes.rate NaN: must be a finite number"},
		{[]string{"--writes.rate=+Inf"}, "writes.rate +Inf: must be a finite number"},
		{[]string{"--writes.routePerMinute=NaN"}, "writes.routePerMinute"},
		{[]string{"--reconcile.interval=1ns"}, "reconcile.interval 1ns: at least 10ms"},
		{[]string{"--reconcile.interval=20ms"}, ""},
		{[]string{"--probe.interval=1ms"}, "probe.interval 1ms: at least 10ms"},
		{[]string{"--probe.interval=0"}, ""},
		{[]string{"--traefik.healthCheck.interval=1ns"}, "traefik.healthCheck.interval 1ns: at least 100ms"},
		{[]string{"--traefik.healthCheck.interval=1s"}, ""},
		{[]string{"--node.address=0.0.0.0"}, `node.address "0.0.0.0": the unspecified address`},
		{[]string{"--node.address=::"}, `node.address "::": the unspecified address`},
		{[]string{"--platform.domains=co.uk"}, `platform.domains[0] "co.uk": a public suffix`},
		{[]string{"--platform.domains=github.io"}, `platform.domains[0] "github.io": a public suffix`},
		{[]string{"--platform.domains=apps.co.uk"}, ""},
		{[]string{"--platform.domains=example.com,apps.example.com"}, `platform.domains[1] "apps.example.com": under platform.domains[0] "example.com": an application named "apps" would take its apex`},
		{[]string{"--platform.domains=apps.example.com,eu1.example.com"}, ""},
		{[]string{"--platform.domains=apps.localhost"}, ""},
	} {
		_, err := loadConfig(t, append([]string{"--stateDir=" + t.TempDir()}, tc.args...), nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: refused: %v", tc.args, err)
		case tc.want != "" && err == nil:
			t.Errorf("%v: accepted, want %q", tc.args, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%v: %v, want it to say %q", tc.args, err, tc.want)
		}
	}
}
