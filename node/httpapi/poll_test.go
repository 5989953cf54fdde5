package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/httpapi"
	"github.com/scafo/ingress/node/store"
)

// The routing endpoints a Traefik polls, through the API in process: formats,
// conditional and compressed answers, prefer, long polls, and which polls are an
// ingress's report. Who may poll at all is TestEveryRouteAnswersEachCredentialAsItsRoleAllows's.

// TestETagAnd304OnlyWhenAsked: every routing body carries a strong ETag; a plain GET
// is always the whole body (Traefik's HTTP provider treats 304 as an error), a 304
// only answers If-None-Match of the current one; with Accept-Encoding gzip the body is
// the identity body compressed. Every 200 and 304 names the store serial and epoch its
// document was derived from, in headers (bodies stay identical across nodes); a pass
// that derives the same revision at a later serial moves the header, not the ETag. The
// headers' spelling (the 304's no-store and nosniff, Content-Encoding, the gzip
// representation's ETag of its own) is pinned by node's TestWireGoldens.
func TestETagAnd304OnlyWhenAsked(t *testing.T) {
	t.Parallel()
	p := newInProcess(t, nil)
	etags := map[string]string{}
	for round := range 2 {
		serial, epoch := storeSerial(t, p.Store)
		mark := func(what string, r *httptest.ResponseRecorder) {
			t.Helper()
			if s, e := r.Header().Get(api.HeaderSerial), r.Header().Get(api.HeaderEpoch); s != strconv.FormatUint(serial, 10) || e != epoch || epoch == "" {
				t.Errorf("%s: serial %q epoch %q, want the store's %d %q", what, s, e, serial, epoch)
			}
		}
		for _, path := range []string{"/v1/ingress/routes", "/v1/ingress/traefik", "/v1/ingress/traefik?prefer=self"} {
			r1 := p.Rec("GET", path, ipIngress, "")
			etag := r1.Header().Get("ETag")
			if r1.Code != 200 || !strings.HasPrefix(etag, `"`) || round == 1 && etag != etags[path] {
				t.Fatalf("%s: %d etag %q (before a bump that changed nothing: %q)", path, r1.Code, etag, etags[path])
			}
			etags[path] = etag
			mark(path, r1)
			if strings.Contains(r1.Body.String(), epoch) {
				t.Errorf("%s: the store's epoch is in the body", path)
			}
			r2 := p.Rec("GET", path, ipIngress, "")
			if r2.Code != 200 || !bytes.Equal(r1.Body.Bytes(), r2.Body.Bytes()) || r2.Header().Get("ETag") != etag {
				t.Fatalf("%s: second plain GET: %d, same body %v", path, r2.Code, bytes.Equal(r1.Body.Bytes(), r2.Body.Bytes()))
			}
			r3 := p.Rec("GET", path, ipIngress, "", "If-None-Match", etag)
			if r3.Code != http.StatusNotModified || r3.Body.Len() != 0 {
				t.Fatalf("%s: If-None-Match current: %d, want 304", path, r3.Code)
			}
			mark(path+" (304)", r3)
			if r4 := p.Rec("GET", path, ipIngress, "", "If-None-Match", `"stale"`); r4.Code != 200 {
				t.Fatalf("%s: If-None-Match stale: %d, want 200", path, r4.Code)
			}
			gz := p.Rec("GET", path, ipIngress, "", "Accept-Encoding", "gzip")
			zr, err := gzip.NewReader(gz.Body)
			if err != nil {
				t.Fatalf("%s: gzip body: %v", path, err)
			}
			if unzipped, err := io.ReadAll(zr); err != nil || !bytes.Equal(unzipped, r1.Body.Bytes()) {
				t.Fatalf("%s: the gzip body decompresses to %d bytes (%v) that differ from the %d-byte identity body", path, len(unzipped), err, r1.Body.Len())
			}
		}
		// A bump that changes no routing content, taken by a pass: same revision, later serial.
		if _, err := store.BumpSerial(context.Background(), p.Store); err != nil {
			t.Fatal(err)
		}
		o, err := p.Identity.Observe(context.Background(), p.Store)
		if err != nil {
			t.Fatal(err)
		}
		p.Identity.Commit(o)
		p.Publish("shop.example")
	}
}

// storeSerial reads the store's serial object: counter and epoch.
func storeSerial(t *testing.T, st store.Store) (uint64, string) {
	t.Helper()
	o, err := st.Get(context.Background(), store.SerialKey)
	if err != nil {
		t.Fatal(err)
	}
	n, e, err := store.ParseSerialEpoch(o.Value)
	if err != nil {
		t.Fatal(err)
	}
	return n, e
}

// awaitParked returns once n long-polls are parked (scafo_longpolls_parked), yielding
// to them meanwhile; it fails the test after 10s.
func (p *inProcess) awaitParked(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); runtime.Gosched() {
		if v, _ := metricValue(t, p, "scafo_longpolls_parked"); v == float64(n) {
			return
		}
	}
	t.Fatalf("%d long-polls never parked", n)
}

// TestOnlyValidIngressPollsAreRecordedAsReports: a report is recorded only for a valid
// poll of an ingress. The admin token's polls are not reports (it is not an ingress); a
// poll answered 404 (unknown format, unknown group) or 400 (a malformed wait, prefer or
// query, the admin token's applied probe) records nothing, so made-up groups and names
// cost nothing later (a refusal is logged naming the ingress); the read-only token's
// report or applied probe is a 403 naming its role (it reads the routing document, never
// as an ingress); the same report on a valid poll is recorded, and only it is listed. An
// unknown format's 404 names it (TestABadPollIsAJSONErrorNamingTheField).
func TestOnlyValidIngressPollsAreRecordedAsReports(t *testing.T) {
	t.Parallel()
	p := newInProcess(t, nil)
	for _, tc := range []struct {
		what, path, token string
		code              int
	}{
		{"the admin token's applied probe", "/v1/ingress/traefik", ipAdmin, 400}, // first: the log below is its
		{"the admin token's poll", "/v1/ingress/traefik", ipAdmin, 200},
		{"an unknown format", "/v1/ingress/nginx", ipIngress, 404},
		{"an unknown group", "/v1/ingress/traefik?group=made-up", ipIngress, 404},
		{"a malformed group", "/v1/ingress/traefik?group=Bad_Group", ipIngress, 400},
		{"a malformed wait", "/v1/ingress/traefik?wait=soon", ipIngress, 400},
		{"a malformed prefer", "/v1/ingress/traefik?prefer=Not_A_Node", ipIngress, 400},
		{"an unparsable query", "/v1/ingress/traefik?a=%zz", ipIngress, 400},
		{"the read-only token's report", "/v1/ingress/routes", ipReadOnly, 403},
		{"the read-only token's applied probe", "/v1/ingress/routes", ipReadOnlyPrevious, 403},
	} {
		hdr := []string{api.HeaderIngress, "edge-fake", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedSerial, "1"}
		if strings.Contains(tc.what, "probe") {
			hdr = []string{api.HeaderIngress, "edge-fake", api.HeaderAppliedProbe, "http://127.0.0.1:80"}
			if tc.token != ipAdmin { // the probe alone: refused as a probe, not as a report
				hdr = hdr[2:]
			}
		}
		rec := p.Rec("GET", tc.path, tc.token, "", hdr...)
		if rec.Code != tc.code {
			t.Fatalf("%s: %d %s, want %d", tc.what, rec.Code, rec.Body, tc.code)
		}
		if h := rec.Header().Get(api.HeaderIngressReport); h != "" {
			t.Errorf("%s: %s: %q, want no report", tc.what, api.HeaderIngressReport, h)
		}
		if tc.code == 400 && tc.token == ipAdmin && !strings.Contains(p.Logs.String(), "ingress=edge-fake") {
			t.Errorf("%s: no log line names edge-fake:\n%s", tc.what, p.Logs.String())
		}
		var e api.Error
		if tc.code == 403 && (json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Role != "read-only") {
			t.Errorf("%s: %.200s, want a 403 naming the read-only role", tc.what, rec.Body)
		}
	}
	if ins := p.ingresses(t); len(ins) != 0 {
		t.Fatalf("after invalid and admin polls, status lists %+v, want no ingress", ins)
	}
	rec := p.Rec("GET", "/v1/ingress/traefik", ipIngress, "", api.HeaderIngress, "edge-real", api.HeaderIngressKind, api.KindPlugin)
	if rec.Code != 200 || rec.Header().Get(api.HeaderIngressReport) != "recorded" {
		t.Fatalf("a valid poll: %d %q %s", rec.Code, rec.Header().Get(api.HeaderIngressReport), rec.Body)
	}
	if ins := p.ingresses(t); len(ins) != 1 || ins[0].Name != "edge-real" {
		t.Fatalf("after a valid poll, status lists %+v, want edge-real", ins)
	}
}

// TestAdminTokenNeverReadsABodyWithPrivateKeys: with fleet certificates delivered inline
// the Traefik configuration carries every key PEM, so the admin token is refused on it
// (403, naming the ingress token and the keyless routing document) whether or not a
// certificate has arrived yet; the ingress token reads it, and the admin still reads the
// routing document. (With delivery "files" the body carries paths, and the admin reads
// it: the credential table's GET /v1/ingress/{format} #traefik row.)
func TestAdminTokenNeverReadsABodyWithPrivateKeys(t *testing.T) {
	t.Parallel()
	p := newInProcess(t, func(c *httpapi.Config) { c.ACMEInline = true })
	for _, tok := range []string{ipAdmin, ipAdminPrevious} {
		rec := p.Rec("GET", "/v1/ingress/traefik", tok, "")
		if b := rec.Body.String(); rec.Code != http.StatusForbidden || !strings.Contains(b, "ingress token") || !strings.Contains(b, "/v1/ingress/routes") || strings.Contains(b, "PRIVATE KEY") {
			t.Errorf("admin GET /v1/ingress/traefik with inline keys: %d %s, want 403 naming the ingress token", rec.Code, b)
		}
		p.Must(200, "GET", "/v1/ingress/routes", tok, "")
	}
	p.Must(200, "GET", "/v1/ingress/traefik", ipIngress, "")
}

// ingresses are the ingresses /v1/status lists.
func (p *inProcess) ingresses(t *testing.T) []api.Ingress {
	t.Helper()
	var st api.Status
	if err := json.Unmarshal(p.Must(200, "GET", api.PathStatus, ipAdmin, ""), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ingresses
}

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
		{"the admin token on an applied probe's poll", ipAdmin,
			[]string{api.HeaderAppliedProbe, "http://127.0.0.1:80"}, http.StatusBadRequest,
			"the admin token is not an ingress", "refused"},
		{"a bad applied probe", ipIngress,
			[]string{api.HeaderAppliedProbe, "ftp://x"}, http.StatusBadRequest,
			"invalid applied probe: " + api.HeaderAppliedProbe, "refused"},
		{"the admin token on a plugin's poll", ipAdmin,
			[]string{api.HeaderIngressKind, api.KindPlugin}, http.StatusOK,
			"the admin token is not an ingress: the poll is served but its report is not recorded", "refused"},
		{"a bad token", "not-a-token-0123456789", nil, http.StatusUnauthorized,
			"rejected ingress request: bad token", "current"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newInProcess(t, nil)
			// Two polls of an HTTP-provider Traefik: the second reports what the first served.
			for range 2 {
				p.Must(200, "GET", "/v1/ingress/traefik", ipIngress, "", api.HeaderIngress, "edge-1")
			}
			if st := p.ingress(t, "edge-1"); st.State != "current" {
				t.Fatalf("before: edge-1 is %s, want current", st.State)
			}
			for range 3 {
				if rec := p.Rec("GET", "/v1/ingress/traefik", tc.token, "", append([]string{api.HeaderIngress, "edge-1"}, tc.hdr...)...); rec.Code != tc.code {
					t.Fatalf("refused poll: %d %s, want %d", rec.Code, rec.Body, tc.code)
				}
			}
			// A poll without a valid credential only claims the name (claimedIngress=):
			// the line never says that ingress was refused.
			key := " ingress=edge-1"
			if tc.code == http.StatusUnauthorized {
				key = " claimedIngress=edge-1"
			}
			var warns []string
			for _, l := range strings.Split(p.Logs.String(), "\n") {
				if strings.Contains(l, "level=WARN") && strings.Contains(l, key) {
					warns = append(warns, l)
				}
			}
			if len(warns) != 1 || !strings.Contains(warns[0], tc.reason) {
				t.Errorf("WARN lines naming edge-1: %q, want one saying %q", warns, tc.reason)
			}
			st := p.ingress(t, "edge-1")
			if st.State != tc.state || tc.state == "refused" && !strings.Contains(st.Refused, strings.TrimPrefix(tc.reason, "invalid applied probe: ")) {
				t.Fatalf("after the refused polls: edge-1 is %s (%q), want %s saying %q", st.State, st.Refused, tc.state, tc.reason)
			}
			if tc.state == "refused" && !p.warns(t, "ingress edge-1 (polling vps-a) is refused") {
				t.Errorf("the status's warnings do not say edge-1 is refused")
			}
			p.Must(200, "GET", "/v1/ingress/traefik", ipIngress, "", api.HeaderIngress, "edge-1")
			if st := p.ingress(t, "edge-1"); st.State == "refused" {
				t.Errorf("after a recorded poll: edge-1 is still refused (%q)", st.Refused)
			}
		})
	}
}

// ingress is the ingress called name as /v1/status lists it.
func (p *inProcess) ingress(t *testing.T, name string) api.Ingress {
	t.Helper()
	for _, in := range p.ingresses(t) {
		if in.Name == name {
			return in
		}
	}
	t.Fatalf("status does not list %s", name)
	return api.Ingress{}
}

// warns reports whether one of /v1/status's warnings starts with prefix.
func (p *inProcess) warns(t *testing.T, prefix string) bool {
	t.Helper()
	var st api.Status
	if err := json.Unmarshal(p.Must(200, "GET", api.PathStatus, ipAdmin, ""), &st); err != nil {
		t.Fatal(err)
	}
	for _, w := range st.Warnings {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}

// TestHTTPProviderIngressIsServedNotApplied: a Traefik on the HTTP provider (no
// X-Scafo-Ingress-Kind) is counted at what it was served, once it polls again.
func TestHTTPProviderIngressIsServedNotApplied(t *testing.T) {
	t.Parallel()
	p := newInProcess(t, nil)
	resp, _ := p.Get("/v1/ingress/traefik?prefer=self", ipIngress, api.HeaderIngress, "edge-h")
	serial, _ := strconv.ParseUint(resp.Header.Get(api.HeaderSerial), 10, 64)
	if serial == 0 {
		t.Fatalf("the poll carried no serial: %v", resp.Header)
	}
	if in := p.ingress(t, "edge-h"); in.Kind != api.KindHTTP || in.Served == nil || in.Served.Serial != 0 || in.Applied != nil {
		t.Errorf("after one poll: %+v, want kind http, nothing counted yet", in)
	}
	p.Get("/v1/ingress/traefik?prefer=self", ipIngress, api.HeaderIngress, "edge-h")
	if in := p.ingress(t, "edge-h"); in.Served == nil || in.Served.Serial != serial || in.Served.Revision != resp.Header.Get(api.HeaderRevision) || in.State != "current" {
		t.Errorf("after a second poll: %+v, want served serial %d, current", in, serial)
	}
}
