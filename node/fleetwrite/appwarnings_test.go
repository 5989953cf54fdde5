package fleetwrite_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/render/fleet"
)

// TestAnAppInAGroupWithoutAPlatformDomainIsWarnedAtItsWrite (issue 25 item 9): an
// application whose ingress group no platform domain is in gets no platform host; the
// derivation says so in /v1/status skipped, and now its write says so too, in
// "warnings". An application that does get a platform host answers without the field.
func TestAnAppInAGroupWithoutAPlatformDomainIsWarnedAtItsWrite(t *testing.T) {
	t.Parallel()
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Platform.Groups = []string{"apps.example.com=eu-1"}
	n := testnode.Start(t, cfg)
	n.WaitReady()
	type answer struct {
		fleet.App
		Warnings []string `json:"warnings"`
	}
	put := func(code int, app, body string) answer {
		var a answer
		raw := n.Must(code, "PUT", "/v1/apps/"+app, testnode.AdminToken, body)
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		if a.Name != app || a.ID == "" {
			t.Fatalf("PUT %s answered %s, not the application", app, raw)
		}
		if a.Warnings == nil && strings.Contains(string(raw), "warnings") {
			t.Errorf("PUT %s: %s", app, raw)
		}
		return a
	}
	eu := put(201, "shop", `{"account":"acme","placement":["vps-a"],"ingress":{"group":"eu-1"}}`)
	if len(eu.Warnings) != 0 {
		t.Errorf("an application of eu-1, the group of apps.example.com: warnings %q", eu.Warnings)
	}
	for _, code := range []int{201, 200} { // create, then the identical (no-op) update
		d := put(code, "blog", `{"account":"acme","placement":["vps-a"]}`)
		if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], `"default"`) || !strings.Contains(d.Warnings[0], "no platform host") {
			t.Errorf("an application of group default, which no platform domain is in (%d): warnings %q", code, d.Warnings)
		}
	}
	other := put(201, "docs", `{"account":"acme","placement":["vps-a"],"ingress":{"group":"us-2"}}`)
	if len(other.Warnings) != 1 || !strings.Contains(other.Warnings[0], `"us-2"`) {
		t.Errorf("an application of an unmapped group us-2: warnings %q", other.Warnings)
	}
}
