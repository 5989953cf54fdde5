package ingress

import "testing"

// TestARefusalIsNotHearingFromTheIngress (hostile review 2, finding 7): a holder of the
// ingress token sending refused polls under a dead ingress's name keeps it neither seen
// nor "refused" past ingresses.lostAfter: it goes lost on time, and its listing keeps the
// reason of the polls refused since.
func TestARefusalIsNotHearingFromTheIngress(t *testing.T) {
	c := newFleetClock()
	book := nodeBook(dirStore(t), "vps-a", c, newFleetMark(1, rev('a'))) // lostAfter 2s
	pluginPoll(t, book, "edge-1", 1, rev('a'))
	state := func() (string, string) {
		t.Helper()
		in, ok := listed(t, book)["edge-1"]
		if !ok {
			t.Fatal("edge-1 is not listed")
		}
		return in.State, in.Refused
	}
	c.Add(lostAfterTest / 2)
	if !book.RefusePoll("edge-1", "the admin token on a poll") {
		t.Fatal("edge-1 is not tracked")
	}
	if st, why := state(); st != "refused" || why != "the admin token on a poll" {
		t.Fatalf("within lostAfter: %s (%q), want refused with the reason", st, why)
	}
	for range 10 { // refused polls every lostAfter/6, past lostAfter
		c.Add(lostAfterTest / 6)
		book.RefusePoll("edge-1", "the admin token on a poll")
	}
	if st, why := state(); st != "lost" || why != "the admin token on a poll" {
		t.Fatalf("past lostAfter with refused polls only: %s (%q), want lost with the reason", st, why)
	}
}
