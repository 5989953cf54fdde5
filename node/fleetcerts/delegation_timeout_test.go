package fleetcerts

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// A tenant's custom wildcard claims whose DNS never answers (a black-holed
// authoritative server, a resolver that times out) hold the manager's loop for one
// lookup's timeout per pass, not for one timeout per claim: the loop also takes on,
// issues and renews every other tenant's names.
func TestBlackHoledDelegationsDoNotStallTheManagersLoop(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	m := &Manager{
		opt:   Options{DNS01: &DNS01{DelegationZone: "acme.fleet.test", Resolvers: []string{pc.LocalAddr().String()}}},
		dns:   map[string]dnsName{},
		names: map[string]*nameState{},
	}
	for i := range 50 {
		w := "*.c" + strconv.Itoa(i) + ".tenant.test"
		m.dns[w] = dnsName{owner: ChallengeCNAME(w), target: DelegationTarget("acme.fleet.test", "flood", w)}
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		m.checkDelegations(true)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a pass over 50 black-holed delegations still runs after %s (one lookup's timeout is 10 s)", time.Since(start).Round(time.Second))
	}
	for n, st := range m.names {
		if st.deleg == nil || st.deleg.ok {
			t.Errorf("%s: %+v, want a failed check recorded", n, st.deleg)
		}
	}
}
