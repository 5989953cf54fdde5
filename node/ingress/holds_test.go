package ingress

import "testing"

// TestHoldsOnlyWithinTheStoreEpoch: a report counts as holding a write's serial only
// when it is of this store's epoch. After a store restore or adopt, serials start over
// in a new epoch: an ingress still on the old store's configuration reports a serial
// that may well be higher, and counting it would let ?wait=applied (and a deploy waiting
// on it) go on while that ingress routes by the old store's state.
func TestHoldsOnlyWithinTheStoreEpoch(t *testing.T) {
	const rev = "sha256:aaaa"
	for _, tc := range []struct {
		name   string
		rep    Report
		serial uint64
		epoch  string
		mark   uint64
		want   bool
	}{
		{"same epoch, serial reached", Report{Epoch: "e2", Serial: 7}, 7, "e2", 7, true},
		{"same epoch, serial passed", Report{Epoch: "e2", Serial: 9}, 7, "e2", 9, true},
		{"same epoch, behind", Report{Epoch: "e2", Serial: 6}, 7, "e2", 7, false},
		{"same epoch, same revision published at the serial", Report{Epoch: "e2", Serial: 6, Revision: rev}, 7, "e2", 7, true},
		{"same revision, not yet published here", Report{Epoch: "e2", Serial: 6, Revision: rev}, 7, "e2", 6, false},
		{"old epoch with a higher serial", Report{Epoch: "e1", Serial: 500}, 7, "e2", 7, false},
		{"old epoch with the same revision", Report{Epoch: "e1", Serial: 500, Revision: rev}, 7, "e2", 7, false},
		{"a report without an epoch (an older ingress)", Report{Serial: 7}, 7, "e2", 7, true},
		{"serial 0 is never held", Report{Epoch: "e2"}, 0, "e2", 0, false},
	} {
		if got := holds(tc.rep, tc.serial, tc.epoch, rev, tc.mark); got != tc.want {
			t.Errorf("%s: holds(%+v, serial %d, epoch %q, mark %d) = %v, want %v", tc.name, tc.rep, tc.serial, tc.epoch, tc.mark, got, tc.want)
		}
	}
}
