package fleetwrite

// Hostile review of OpenRegistry: a corrupt instances.json with cross-application
// conflicts (two applications on one port, pairs overlapping another application's
// ports or pair, a pair outside the range).

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Corrupt instances.json: two applications on one port (one tenant's traffic served by
// another's process) must not load silently.
func TestHostileCorruptFileWithTwoAppsOnOnePortIsRefused(t *testing.T) {
	path := writeCorrupt(t, `{"instances":{"shop":{"port":24000,"appId":"id-shop"},"blog":{"port":24000,"appId":"id-blog"}}}`)
	_, err := OpenRegistry(path, 24000, 24009, time.Minute)
	if err == nil {
		t.Fatal("instances.json with shop and blog on port 24000 loaded without error: both tenants' hostnames route to one process")
	}
	for _, want := range []string{"24000", "shop", "blog"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %s", err, want)
		}
	}
}

// A pair whose idle member is another application's port (or another pair's) must not
// be kept: once blog releases 24005 its quarantine is overridden by shop's pair.
func TestHostileCorruptPairOverlappingAnotherAppIsNotKept(t *testing.T) {
	path := writeCorrupt(t, `{"instances":{"shop":{"port":24000,"appId":"id-shop"},"blog":{"port":24005,"appId":"id-blog"}},
		"pairs":{"shop":{"appId":"id-shop","ports":[24000,24005]}}}`)
	reg, err := OpenRegistry(path, 24000, 24009, time.Minute)
	if err != nil {
		return // refused clearly: fine
	}
	if got := reg.Ports("shop"); got[0] == 24005 || got[1] == 24005 {
		t.Errorf("shop's pair %v kept blog's port 24005", got)
	}
	if err := reg.Release("blog"); err != nil {
		t.Fatal(err)
	}
	p := 24005
	if _, _, _, err := reg.Set("shop", "id-shop", &p, true); !errors.Is(err, ErrPortTaken) {
		t.Errorf("shop moved onto blog's port 24005 while it is quarantined for blog: %v, want ErrPortTaken", err)
	}
}

func TestHostileCorruptPairsSharingAnIdleMemberAreNotKept(t *testing.T) {
	path := writeCorrupt(t, `{"instances":{"shop":{"port":24000,"appId":"id-shop"},"blog":{"port":24001,"appId":"id-blog"}},
		"pairs":{"shop":{"appId":"id-shop","ports":[24000,24002]},"blog":{"appId":"id-blog","ports":[24001,24002]}}}`)
	reg, err := OpenRegistry(path, 24000, 24009, time.Minute)
	if err != nil {
		return
	}
	s, b := reg.Ports("shop"), reg.Ports("blog")
	if (s[0] == 24002 || s[1] == 24002) && (b[0] == 24002 || b[1] == 24002) {
		t.Errorf("shop %v and blog %v both hold 24002 as their idle member", s, b)
	}
}

func TestHostileCorruptPairOutsideTheRangeIsNotKept(t *testing.T) {
	path := writeCorrupt(t, `{"instances":{"shop":{"port":24000,"appId":"id-shop"}},
		"pairs":{"shop":{"appId":"id-shop","ports":[22,24000]}}}`)
	reg, err := OpenRegistry(path, 24000, 24009, time.Minute)
	if err != nil {
		return
	}
	if got := reg.Ports("shop"); got[0] == 22 {
		t.Errorf("shop's pair %v kept port 22, outside 24000..24009 (the CLI's move goes to the other member)", got)
	}
}

// A pair whose idle member is quarantined for another application (blog left it) is
// not kept, and the quarantine, not the pair, decides who may take the port.
func TestHostileCorruptPairOverAnotherAppsQuarantineIsNotKept(t *testing.T) {
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	path := writeCorrupt(t, `{"instances":{"shop":{"port":24000,"appId":"id-shop"}},
		"pairs":{"shop":{"appId":"id-shop","ports":[24000,24005]}},
		"quarantine":[{"port":24005,"app":"blog","appId":"id-blog","until":"`+until+`"}]}`)
	reg, err := OpenRegistry(path, 24000, 24009, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Ports("shop"); got[0] == 24005 || got[1] == 24005 {
		t.Errorf("shop's pair %v kept 24005, quarantined for blog", got)
	}
	p := 24005
	if _, _, _, err := reg.Set("shop", "id-shop", &p, true); !errors.Is(err, ErrPortTaken) {
		t.Errorf("shop moved onto 24005 while it is quarantined for blog: %v, want ErrPortTaken", err)
	}
}
