package scafo

import (
	"context"
	"testing"
	"time"
)

// TestTwoFailingNamesCannotLockAnApplicationsNewNameOut (hostile round five): the
// share's doc says a name refused now "is approved at a later handshake, once the
// window slides". An anonymous client handshaking two of shop's names whose orders
// fail (DNS not pointed yet), every 10 s, takes each approval the moment it is due (a
// name is approved again every 10 minutes: 12 an hour against the share of 10); shop's
// new name, handshaked by its visitors once a minute from the second hour, must still
// be approved within the next two hours.
func TestTwoFailingNamesCannotLockAnApplicationsNewNameOut(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	perm, _ := docPermission(t, shareDoc(), 0, 0, &now) // the defaults: 100 an hour, 10 a share
	ctx := context.Background()
	attacker := 0
	for s := 0; s < 3*3600; s += 10 {
		now = now.Add(10 * time.Second)
		for _, name := range []string{"shop1.example.org", "shop2.example.org"} {
			if perm.CertificateAllowed(ctx, name) == nil {
				attacker++ // ordered; the order fails: no certificate lands
			}
		}
		if s >= 3600 && s%60 == 0 && perm.CertificateAllowed(ctx, "shop3.example.org") == nil {
			t.Logf("shop3 approved %s after it appeared (the failing names had %d approvals)", time.Duration(s-3600)*time.Second, attacker)
			return
		}
	}
	t.Fatalf("shop3, handshaked once a minute for two hours, was never approved: two failing names of shop, handshaked every 10 s, took all %d approvals of its share", attacker)
}
