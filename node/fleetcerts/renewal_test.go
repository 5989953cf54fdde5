package fleetcerts

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// TestAFailingRenewalIsReportedWhileTheNameStaysValid: a held certificate whose renewal
// fails (CertMagic's cert_failed with renewal true, which it emits only inside the
// renewal window) is listed by Renewals as failing, with the error, while Status still
// lists the name valid; a renewal that succeeds clears it, and so does another node's
// renewal taken from the store (another serial held). A failed first obtain of a name
// without a certificate is not a failing renewal, and a name without a certificate is
// not listed. Before, nothing told a held certificate failing to renew from one that
// renews: the alert guessed from the days left.
func TestAFailingRenewalIsReportedWhileTheNameStaysValid(t *testing.T) {
	m, err := New(Options{Storage: &certmagic.FileStorage{Path: t.TempDir()}, PlatformDomains: []string{"apps.example.com"}, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.Sync(docWith("held.example.org", "new.example.org"))
	m.mu.Lock()
	m.names["held.example.org"] = &nameState{cert: &heldCert{serial: "aa", notAfter: time.Now().Add(72 * time.Hour)}}
	m.names["new.example.org"] = &nameState{}
	m.mu.Unlock()
	ev := func(event, name string, renewal bool) {
		t.Helper()
		data := map[string]any{"identifier": name, "renewal": renewal}
		if event == "cert_failed" {
			data["error"] = errors.New("acme: urn:ietf:params:acme:error:rateLimited")
		}
		if err := m.onEvent(t.Context(), event, data); err != nil {
			t.Fatal(err)
		}
	}
	renewals := func() []Renewal {
		var out []Renewal
		for _, r := range m.Renewals() {
			if r.Name != "apps.example.com" { // the API apex: no certificate here
				out = append(out, r)
			}
		}
		return out
	}
	quiet := []Renewal{{Name: "held.example.org"}}
	if got := renewals(); !slices.Equal(got, quiet) {
		t.Fatalf("before any renewal: %+v, want %+v", got, quiet)
	}

	ev("cert_obtaining", "held.example.org", true)
	ev("cert_failed", "held.example.org", true)
	ev("cert_obtaining", "new.example.org", false)
	ev("cert_failed", "new.example.org", false)
	failing := []Renewal{{Name: "held.example.org", Failing: true, Error: "acme: urn:ietf:params:acme:error:rateLimited"}}
	if got := renewals(); !slices.Equal(got, failing) {
		t.Fatalf("after a failed renewal: %+v, want %+v", got, failing)
	}
	if s := stateOf(m, "held.example.org"); s.State != StateValid {
		t.Fatalf("a held certificate failing to renew: state %q, want %q (it is valid until NotAfter)", s.State, StateValid)
	}

	ev("cert_obtaining", "held.example.org", true)
	ev("cert_obtained", "held.example.org", true)
	if got := renewals(); !slices.Equal(got, quiet) {
		t.Fatalf("after a renewal that succeeded: %+v, want %+v", got, quiet)
	}

	// Failing again; then a peer's renewal arrives: refresh takes another certificate (the
	// cache holds none here, so the held one is dropped, as an expired one would be, and
	// the name is no longer listed at all).
	ev("cert_failed", "held.example.org", true)
	if got := renewals(); !slices.Equal(got, failing) {
		t.Fatalf("after a second failed renewal: %+v, want %+v", got, failing)
	}
	m.refresh()
	if got := renewals(); len(got) != 0 {
		t.Fatalf("after the held certificate was replaced: %+v, want none listed", got)
	}
	m.mu.Lock()
	left := m.names["held.example.org"].renewErr
	m.mu.Unlock()
	if left != "" {
		t.Fatalf("the replaced certificate's renewal error stays: %q", left)
	}
}
