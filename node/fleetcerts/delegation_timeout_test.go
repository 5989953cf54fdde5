package fleetcerts

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A tenant's custom wildcard claims whose DNS never answers (a black-holed
// authoritative server, a resolver that times out) hold the manager's loop for one
// lookup's timeout per pass, not for one timeout per claim: the loop also takes on,
// issues and renews every other tenant's names.
//
// The lookups of a pass are in flight at once: a server that answers nothing until it
// holds all 50 questions ends the pass at once (one lookup at a time, the first would
// wait its whole timeout, an hour here, for an answer that never comes). And a server
// that never answers ends each lookup at its timeout, with a failed check recorded.
func TestBlackHoledDelegationsDoNotStallTheManagersLoop(t *testing.T) {
	const claims = 50
	pass := func(addr string, timeout time.Duration) *Manager {
		t.Helper()
		m := &Manager{
			opt:   Options{DNS01: &DNS01{DelegationZone: "acme.fleet.test", Resolvers: []string{addr}}},
			dns:   map[string]dnsName{},
			names: map[string]*nameState{},
			now:   time.Now, lookupTimeout: timeout,
		}
		for i := range claims {
			w := "*.c" + strconv.Itoa(i) + ".tenant.test"
			m.dns[w] = dnsName{owner: ChallengeCNAME(w), target: DelegationTarget("acme.fleet.test", "flood", w)}
		}
		done := make(chan struct{})
		go func() {
			m.checkDelegations(true)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("a pass over %d delegations (lookup timeout %s) still runs after 30s", claims, timeout)
		}
		return m
	}
	failed := func(m *Manager, reason string) {
		t.Helper()
		if len(m.names) != claims {
			t.Fatalf("%d names checked, want %d", len(m.names), claims)
		}
		for n, st := range m.names {
			if st.deleg == nil || st.deleg.ok || !strings.Contains(st.deleg.reason, reason) {
				t.Errorf("%s: %+v, want a failed check (%q)", n, st.deleg, reason)
			}
		}
	}

	// All at once: answered (NXDOMAIN) only when every question is in.
	barrier := udpServer(t, func(pc net.PacketConn) {
		type q struct {
			from net.Addr
			msg  *dns.Msg
		}
		var held []q
		buf := make([]byte, 512)
		for len(held) < claims {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			msg := new(dns.Msg)
			if msg.Unpack(buf[:n]) == nil {
				held = append(held, q{from, msg})
			}
		}
		for _, h := range held {
			r := new(dns.Msg)
			r.SetRcode(h.msg, dns.RcodeNameError)
			b, _ := r.Pack()
			pc.WriteTo(b, h.from)
		}
	})
	failed(pass(barrier, time.Hour), "no CNAME at")

	// Never answered: each lookup ends at its timeout.
	hole := udpServer(t, func(pc net.PacketConn) {
		buf := make([]byte, 512)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	})
	failed(pass(hole, 100*time.Millisecond), "looking up")
}

// udpServer serves serve on a UDP socket on 127.0.0.1 until the test ends.
func udpServer(t *testing.T, serve func(net.PacketConn)) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go serve(pc)
	return pc.LocalAddr().String()
}
