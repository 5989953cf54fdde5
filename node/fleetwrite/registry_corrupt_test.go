package fleetwrite

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHostileCorruptRegistryFilesAreRefusedOrMended: a corrupt instances.json with
// cross-application conflicts never loads as it is. Two applications on one port (one
// tenant's traffic served by another's process) are refused, naming the port and both.
// A pair whose idle member is another application's port, another pair's idle member,
// outside the range or quarantined for another application is not kept (refusing the
// file is fine too, unless the row must load): once loaded, no port is in two
// applications' pairs, outside 24000..24009 or quarantined; and shop cannot move onto
// the port that is another's, even once blog released it (its quarantine decides).
func TestHostileCorruptRegistryFilesAreRefusedOrMended(t *testing.T) {
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, file string
		refused    []string // refused, naming each
		mustLoad   bool
		release    string // released before the move onto onto
		onto       int    // a port shop must not take (0: none tried)
	}{
		{name: "two applications on one port", refused: []string{"24000", "shop", "blog"},
			file: `{"instances":{"shop":{"port":24000,"appId":"id-shop"},"blog":{"port":24000,"appId":"id-blog"}}}`},
		{name: "a pair over another application's port", release: "blog", onto: 24005,
			file: `{"instances":{"shop":{"port":24000,"appId":"id-shop"},"blog":{"port":24005,"appId":"id-blog"}},
			"pairs":{"shop":{"appId":"id-shop","ports":[24000,24005]}}}`},
		{name: "two pairs sharing an idle member",
			file: `{"instances":{"shop":{"port":24000,"appId":"id-shop"},"blog":{"port":24001,"appId":"id-blog"}},
			"pairs":{"shop":{"appId":"id-shop","ports":[24000,24002]},"blog":{"appId":"id-blog","ports":[24001,24002]}}}`},
		{name: "a pair outside the range",
			file: `{"instances":{"shop":{"port":24000,"appId":"id-shop"}},"pairs":{"shop":{"appId":"id-shop","ports":[22,24000]}}}`},
		{name: "a pair over another application's quarantine", mustLoad: true, onto: 24005,
			file: `{"instances":{"shop":{"port":24000,"appId":"id-shop"}},"pairs":{"shop":{"appId":"id-shop","ports":[24000,24005]}},
			"quarantine":[{"port":24005,"app":"blog","appId":"id-blog","until":"` + until + `"}]}`},
	} {
		reg, err := OpenRegistry(writeCorrupt(t, tc.file), 24000, 24009, time.Minute)
		switch {
		case tc.refused != nil && err == nil:
			t.Errorf("%s: loaded without error: both tenants' hostnames route to one process", tc.name)
			continue
		case tc.refused != nil:
			for _, want := range tc.refused {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: refusal %q does not name %s", tc.name, err, want)
				}
			}
			continue
		case err != nil && tc.mustLoad:
			t.Fatalf("%s: %v", tc.name, err)
		case err != nil:
			continue // refused clearly: fine
		}
		held := map[int]string{}
		for _, app := range []string{"blog", "shop"} {
			ports := reg.Ports(app)
			for _, p := range slices.Compact(ports[:]) {
				if p != 0 && (p < 24000 || p > 24009 || held[p] != "" || slices.Contains(quarantinedPorts(reg), p)) {
					t.Errorf("%s: %s's pair %v kept %d (outside the range, quarantined, or %q's)", tc.name, app, ports, p, held[p])
				}
				held[p] = app
			}
		}
		if tc.release != "" {
			if err := reg.Release(tc.release); err != nil {
				t.Fatal(err)
			}
		}
		if p := tc.onto; p != 0 {
			if _, _, _, err := reg.Set("shop", "id-shop", &p, true); !errors.Is(err, ErrPortTaken) {
				t.Errorf("%s: shop moved onto %d while it is quarantined for blog: %v, want ErrPortTaken", tc.name, p, err)
			}
		}
	}
}
