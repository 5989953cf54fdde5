package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// TestARefusedPollIsLoggedNamingTheIngressAndNeverListedCurrent: every refusal of an
// ingress's poll is one WARN line (the reject log: once per source per limits.rejectLog,
// however many polls) naming the ingress and why, and an ingress this node tracks is
// listed refused, with why, from the first refused poll on, not current until it is
// lost. The admin token in a Traefik's ingress.env (its HTTP provider declares the applied
// probe: 400), a bad applied probe (400), and the admin token on a plugin's poll (served,
// its report not recorded) each mark it; a bad token names it in the log but marks
// nothing (a name is no credential). A poll recorded again makes it current again.
func TestARefusedPollIsLoggedNamingTheIngressAndNeverListedCurrent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, token string
		hdr         []string
		code        int
		reason      string // in the WARN line and in the status's refused
		state       string // the ingress's state after the refused polls
	}{
		{"the admin token on an applied probe's poll", testnode.AdminToken,
			[]string{api.HeaderAppliedProbe, "http://127.0.0.1:80"}, http.StatusBadRequest,
			"the admin token is not an ingress", "refused"},
		{"a bad applied probe", testnode.IngressToken,
			[]string{api.HeaderAppliedProbe, "ftp://x"}, http.StatusBadRequest,
			"invalid applied probe: " + api.HeaderAppliedProbe, "refused"},
		{"the admin token on a plugin's poll", testnode.AdminToken,
			[]string{api.HeaderIngressKind, api.KindPlugin}, http.StatusOK,
			"the admin token is not an ingress: the poll is served but its report is not recorded", "refused"},
		{"a bad token", "not-a-token-0123456789", nil, http.StatusUnauthorized,
			"rejected ingress request: bad token", "current"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
			n.WaitReady()
			// Two polls of an HTTP-provider Traefik: the second reports what the first served.
			for range 2 {
				n.Must(200, "GET", "/v1/ingress/traefik", testnode.IngressToken, "", api.HeaderIngress, "edge-1")
			}
			if st := ingressState(t, n, "edge-1"); st.State != "current" {
				t.Fatalf("before: edge-1 is %s, want current", st.State)
			}
			for range 3 {
				resp, b := n.Get("/v1/ingress/traefik", tc.token, append([]string{api.HeaderIngress, "edge-1"}, tc.hdr...)...)
				if resp.StatusCode != tc.code {
					t.Fatalf("refused poll: %d %s, want %d", resp.StatusCode, b, tc.code)
				}
			}
			var warns []string
			for _, l := range strings.Split(n.Logs.String(), "\n") {
				// A poll without a valid credential only claims the name (claimedIngress=):
				// the line never says that ingress was refused.
				key := " ingress=edge-1"
				if tc.code == http.StatusUnauthorized {
					key = " claimedIngress=edge-1"
				}
				if strings.Contains(l, "level=WARN") && strings.Contains(l, key) {
					warns = append(warns, l)
				}
			}
			if len(warns) != 1 || !strings.Contains(warns[0], tc.reason) {
				t.Errorf("WARN lines naming edge-1: %q, want one saying %q", warns, tc.reason)
			}
			st := ingressState(t, n, "edge-1")
			if st.State != tc.state || tc.state == "refused" && !strings.Contains(st.Refused, strings.TrimPrefix(tc.reason, "invalid applied probe: ")) {
				t.Fatalf("after the refused polls: edge-1 is %s (%q), want %s saying %q", st.State, st.Refused, tc.state, tc.reason)
			}
			if tc.state == "refused" && !hasWarning(t, n, "ingress edge-1 (polling vps-a) is refused") {
				t.Errorf("the status's warnings do not say edge-1 is refused")
			}
			n.Must(200, "GET", "/v1/ingress/traefik", testnode.IngressToken, "", api.HeaderIngress, "edge-1")
			if st := ingressState(t, n, "edge-1"); st.State == "refused" {
				t.Errorf("after a recorded poll: edge-1 is still refused (%q)", st.Refused)
			}
		})
	}
}

// TestAPollNamingAnIngressNotTrackedMarksNothing: a refused poll naming an ingress this
// node has never recorded lists nothing (a made-up name costs no entry), but is logged.
func TestAPollNamingAnIngressNotTrackedMarksNothing(t *testing.T) {
	t.Parallel()
	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()
	resp, b := n.Get("/v1/ingress/traefik", testnode.AdminToken, api.HeaderIngress, "edge-new", api.HeaderAppliedProbe, "http://127.0.0.1:80")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("%d %s, want 400", resp.StatusCode, b)
	}
	if ins := statusIngresses(t, n); len(ins) != 0 {
		t.Errorf("status lists %+v, want no ingress", ins)
	}
	if !strings.Contains(n.Logs.String(), "ingress=edge-new") {
		t.Errorf("no log line names edge-new:\n%s", n.Logs.String())
	}
}

func ingressState(t *testing.T, n *testnode.Node, name string) api.Ingress {
	t.Helper()
	for _, in := range statusIngresses(t, n) {
		if in.Name == name {
			return in
		}
	}
	t.Fatalf("status does not list %s", name)
	return api.Ingress{}
}

func hasWarning(t *testing.T, n *testnode.Node, prefix string) bool {
	t.Helper()
	resp, b := n.Get("/v1/status", testnode.AdminToken)
	var st api.Status
	if err := json.Unmarshal(b, &st); resp.StatusCode != 200 || err != nil {
		t.Fatalf("status: %d %v %s", resp.StatusCode, err, b)
	}
	for _, w := range st.Warnings {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}
