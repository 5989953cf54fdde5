package httpapi

import (
	"net/http"
	"testing"
)

// TestForwardedForIsBelievedOnlyFromTrustedProxies: the per-client budget is kept for
// the remote address unless that is a trusted proxy (the node's test of the same name
// drives the rest over HTTP).
func TestForwardedForIsBelievedOnlyFromTrustedProxies(t *testing.T) {
	t.Run("clientOf", func(t *testing.T) {
		trusted, err := parseTrustedProxies([]string{"10.0.0.0/8", "192.0.2.7", "fd00::/8"})
		if err != nil {
			t.Fatal(err)
		}
		s := &API{trusted: trusted}
		for _, c := range []struct {
			remote string
			xff    []string
			want   string
		}{
			{"203.0.113.9:5000", []string{"1.2.3.4"}, "203.0.113.9"},             // untrusted peer: XFF ignored
			{"10.1.2.3:5000", nil, "10.1.2.3"},                                   // trusted, no XFF
			{"10.1.2.3:5000", []string{"6.6.6.6, 1.2.3.4"}, "1.2.3.4"},           // right-most
			{"10.1.2.3:5000", []string{"6.6.6.6, 1.2.3.4, 10.9.9.9"}, "1.2.3.4"}, // through two proxies
			{"10.1.2.3:5000", []string{"6.6.6.6", "1.2.3.4, 192.0.2.7"}, "1.2.3.4"},
			{"10.1.2.3:5000", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"}, // all trusted
			{"10.1.2.3:5000", []string{"1.2.3.4, garbage"}, "10.1.2.3"},   // unparsable: stop at the proxy
			{"[fd00::1]:5000", []string{"2001:db8::5"}, "2001:db8::/64"},  // an IPv6 client is its /64
			{"[::ffff:10.0.0.5]:5000", []string{"::ffff:1.2.3.4"}, "1.2.3.4"},
			{"192.0.2.8:5000", []string{"1.2.3.4"}, "192.0.2.8"},
		} {
			r, _ := http.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.remote
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := s.clientOf(r); got != c.want {
				t.Errorf("remote %s, X-Forwarded-For %q: %s, want %s", c.remote, c.xff, got, c.want)
			}
		}
	})
}
