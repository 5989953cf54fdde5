package httpapi_test

// Hostile clients (docs/design.md §5): connections held without a token, floods of rejected
// credentials, refusals that read the same whatever the request's shape.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
)

// ---- connection exhaustion ----

// The slow-client helper runs in a child process (the test binary again), so that its
// connections do not count against the file limit of the process the node runs in.
const (
	envSlowAddr  = "SCAFO_TEST_SLOW_CLIENTS_ADDR"
	envSlowCount = "SCAFO_TEST_SLOW_CLIENTS_N"
)

// TestHelperSlowClients is not a test: run by TestSlowBodiesDoNotStarvePolls in a child
// process, it opens N connections that each send a request's headers announcing a
// 100-byte body and never send the body, prints "READY", and holds them until its
// standard input closes (at most 60 s).
func TestHelperSlowClients(t *testing.T) {
	addr := os.Getenv(envSlowAddr)
	if addr == "" {
		t.Skip("helper process for TestSlowBodiesDoNotStarvePolls")
	}
	n, _ := strconv.Atoi(os.Getenv(envSlowCount))
	// A quarter are refused at authentication (no token, a bad one); the rest are
	// requests that are answered without their body being read (net/http then drains it
	// after the answer), one of them a poll with the right token. All hold their
	// connection until the body arrives, which it never does.
	paths := []string{
		"PUT /v1/apps/shop/domains/ti.to/paths", // no token
		"GET /v1/healthz",
		"GET /v1/readyz",
		"GET /metrics",
		"POST /v1/tokens", // a bad token
		"GET /v1/health/instances/shop",
		"GET /v1/ingress/traefik", // the ingress token
		"GET /v1/healthz",
	}
	var conns []net.Conn
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Printf("DIAL-ERROR %d %v\n", i, err)
			break
		}
		auth := ""
		switch i % len(paths) {
		case 4:
			auth = "Authorization: Bearer scafo_0123456789abcdef_" + strings.Repeat("ab", 32) + "\r\n"
		case 6:
			auth = "Authorization: Bearer " + testnode.IngressToken + "\r\n"
		}
		fmt.Fprintf(c, "%s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", paths[i%len(paths)], auth)
		conns = append(conns, c)
	}
	fmt.Printf("READY %d\n", len(conns))
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
	}
	for _, c := range conns {
		c.Close()
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("cannot count open files (no /proc/self/fd)")
	}
	return len(ents)
}

// TestSlowBodiesDoNotStarvePolls reproduces issue 12 item 5: on a node whose process may
// open 256 files, 500 connections that send headers announcing a body and never send it
// must not stop Traefik's polls or readiness answers.
func TestSlowBodiesDoNotStarvePolls(t *testing.T) {
	const attackers = 500
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	// The helper process raises its soft limit to the hard one (the Go runtime does at
	// start); it needs a file per connection.
	if lim.Max < attackers+100 {
		t.Skipf("hard open-file limit %d is below the %d the slow clients need", lim.Max, attackers+100)
	}
	// The node's process gets the incident's limit: 256 files (more if the test binary
	// already holds many).
	soft := uint64(max(256, openFDs(t)+160))
	if soft > lim.Cur {
		t.Skipf("soft open-file limit %d is below %d", lim.Cur, soft)
	}
	orig := lim
	lowered := lim
	lowered.Cur = soft
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	t.Logf("open-file limit lowered to %d (hard %d) for the node's process", soft, lim.Max)

	n := testnode.Start(t, testnode.Config(t, "vps-a", t.TempDir()))
	n.WaitReady()

	// The attack, from another process.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSlowClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), envSlowAddr+"="+strings.TrimPrefix(n.URL, "http://"), envSlowCount+"="+strconv.Itoa(attackers))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "READY") || strings.HasPrefix(line, "DIAL-ERROR") {
				select {
				case ready <- line:
				default:
				}
			}
		}
	}()
	select {
	case line := <-ready:
		if line != fmt.Sprintf("READY %d", attackers) {
			t.Fatalf("slow clients: %s", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("slow clients did not connect within 30s")
	}

	// The slow clients fill the general part of the connection cap: what follows is
	// served from the reserve.
	if _, _, ok := testnode.ConnsHeld(n); ok {
		nodetest.WaitFor(t, 30*time.Second, "the slow clients to fill the general connections", func() bool {
			open, general, _ := testnode.ConnsHeld(n)
			return open >= general
		})
	}
	minOpen, general, _ := testnode.ConnsHeld(n)
	t.Logf("%d connections open, %d of them general", minOpen, general)

	// While the slow clients hold their connections, Traefik's polls (a new connection
	// each, the hardest case) and readiness probes keep answering in their normal time.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	probe := func(path, token string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, n.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, fmt.Errorf("after %s: %w", time.Since(start).Round(time.Millisecond), err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, fmt.Errorf("after %s: %s", time.Since(start).Round(time.Millisecond), b)
		}
		return resp.StatusCode, nil
	}
	end := time.Now().Add(3 * time.Second)
	polls := 0
	for time.Now().Before(end) {
		open, _, _ := testnode.ConnsHeld(n)
		minOpen = min(minOpen, open)
		code, err := probe("/v1/ingress/routes", testnode.IngressToken)
		if err != nil || code != http.StatusOK {
			t.Fatalf("poll %d under attack: %d %v", polls, code, err)
		}
		code, err = probe("/v1/readyz", "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("readyz %d under attack: %d %v", polls, code, err)
		}
		polls++
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d polls and readiness probes answered while %d slow-body connections were open (at least %d of them held by the node)",
		polls, attackers, minOpen)
}

// ---- rejected requests are cheap ----

// rejectionLines counts the log lines about rejected requests.
func rejectionLines(logs string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "rejected") {
			n++
		}
	}
	return n
}

// TestRejectedRequestsAreCheap: a flood of bad credentials reads the store a bounded
// number of times (none for a token that is not shaped like an application token, once
// for a well-formed one), and is logged in a few lines, not one per request.
func TestRejectedRequestsAreCheap(t *testing.T) {
	n, st := testnode.StartCountingTokens(t)
	testnode.FleetOf(t, n, "tito-classic")
	var tok struct{ ID, Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", testnode.AdminToken, `{"account":"acme","app":"tito-classic","roles":["publish"]}`), &tok)
	n.Must(200, "PUT", testnode.PathsURL, tok.Token, `{"paths":{}}`)

	const flood = 200
	bad := map[string]string{
		"unknown id, well formed":     "scafo_0123456789abcdef_" + strings.Repeat("cd", 32),
		"real id, wrong secret":       "scafo_" + tok.ID + "_" + strings.Repeat("0", 64),
		"real id, short secret":       "scafo_" + tok.ID + "_abc",
		"real id, non-hex secret":     "scafo_" + tok.ID + "_" + strings.Repeat("zz", 32),
		"real id, upper-case secret":  "scafo_" + tok.ID + "_" + strings.ToUpper(tok.Token[len(tok.Token)-64:]),
		"real token with a suffix":    tok.Token + "x",
		"not an application token":    "hunter2",
		"upper-case id, well formed":  "scafo_0123456789ABCDEF_" + strings.Repeat("cd", 32),
		"real token, trailing '_'":    tok.Token + "_",
		"real id, secret of 65 chars": "scafo_" + tok.ID + "_" + strings.Repeat("a", 65),
	}
	wellFormed := 2 // the first two are shaped like tokens: at most one read each
	logsBefore := rejectionLines(n.Logs.String())
	readsBefore := int(st.Records.Load())
	for what, b := range bad {
		for i := 0; i < flood/len(bad); i++ {
			if resp, body := n.Do("PUT", testnode.PathsURL, b, `{"paths":{}}`); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: %d %s", what, resp.StatusCode, body)
			}
		}
	}
	for i := 0; i < flood; i++ {
		if resp, _ := n.Get("/v1/ingress/routes", "not-the-ingress-token"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bad ingress token: %d", resp.StatusCode)
		}
	}
	if reads := int(st.Records.Load()) - readsBefore; reads > wellFormed {
		t.Errorf("%d bad application tokens read the store %d times, want at most %d", flood, reads, wellFormed)
	}
	if lines := rejectionLines(n.Logs.String()) - logsBefore; lines > 3 {
		t.Errorf("%d rejected requests from one address logged %d lines, want at most 3", 2*flood, lines)
	}
	// The real token still works, and is still read from the store each time (a
	// revocation takes effect at once).
	readsBefore = int(st.Records.Load())
	n.Must(200, "PUT", testnode.PathsURL, tok.Token, `{"paths":{}}`)
	if int(st.Records.Load()) == readsBefore {
		t.Error("a valid application token was not looked up in the store")
	}
	// A known (public) token id with a new wrong secret each time is not let past the
	// lookup budget by the id having been seen valid: that is keyed by the whole token.
	readsBefore = int(st.Records.Load())
	for i := 0; i < flood; i++ {
		wrong := fmt.Sprintf("scafo_%s_%064x", tok.ID, rand.Uint64())
		if resp, _ := n.Do("PUT", testnode.PathsURL, wrong, `{"paths":{}}`); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("wrong secret for a real id: %d", resp.StatusCode)
		}
	}
	if reads := int(st.Records.Load()) - readsBefore; reads != 0 {
		t.Errorf("%d wrong secrets for a known id read the store %d times, want none (they fail the MAC)", flood, reads)
	}
	// A flood of random well-formed tokens (a new id each time, so no cache helps)
	// fails the MAC: 401 without a store read (tokenmac_test.go has the rest).
	readsBefore = int(st.Records.Load())
	for i := 0; i < flood; i++ {
		rnd := fmt.Sprintf("scafo_%016x_%s", rand.Uint64(), strings.Repeat("ab", 32))
		if resp, _ := n.Do("PUT", testnode.PathsURL, rnd, `{"paths":{}}`); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("random token: %d", resp.StatusCode)
		}
	}
	if reads := int(st.Records.Load()) - readsBefore; reads != 0 {
		t.Errorf("%d random well-formed tokens from one source read the store %d times, want none", flood, reads)
	}
	n.Must(200, "PUT", testnode.PathsURL, tok.Token, `{"paths":{}}`) // a token seen valid is not held back
	n.Must(200, "DELETE", "/v1/tokens/"+tok.ID, testnode.AdminToken, "")
	n.Must(401, "PUT", testnode.PathsURL, tok.Token, `{"paths":{}}`)
	if strings.Contains(n.Logs.String(), tok.Token) {
		t.Fatal("an application token appears in the logs")
	}
}

// ---- a refusal reads the same whatever the request's shape ----

// TestControlPlaneRefusalIgnoresHostShape: an application token on the control-plane
// application gets one answer, 403 with one body, for every host spelling and body,
// on both methods of the path-map door.
func TestControlPlaneRefusalIgnoresHostShape(t *testing.T) {
	cfg := testnode.Config(t, "vps-a", t.TempDir())
	cfg.Writes.Rate, cfg.Writes.Burst = 1000, 1000 // every refused attempt counts against writes.rate
	n := testnode.Start(t, cfg)
	n.WaitReady()
	testnode.FleetOf(t, n, "console")
	n.Must(201, "PUT", "/v1/apps/console/domains/console.example.com", testnode.AdminToken, "")
	var tok struct{ Token string }
	json.Unmarshal(n.Must(201, "POST", "/v1/tokens", testnode.AdminToken, `{"account":"acme","app":"console","roles":["publish"]}`), &tok)
	n.Must(200, "PUT", "/v1/apps/console", testnode.AdminToken, `{"account":"acme","placement":["vps-a"],"controlPlane":true}`)

	hosts := []string{
		"console.example.com", // claimed by console
		"ti.to",               // claimed by console (fleetOf)
		"unclaimed.example.com",
		"Bad_Host!",
		"-leading-dash.example.com",
		"a..b",
		"CONSOLE.EXAMPLE.COM",
		strings.Repeat("x", 300) + ".com",
	}
	bodies := []string{`{"paths":{}}`, `{"paths":{"a":"console.apps.example.com"}}`, `{"pathz":{}}`, `{"paths":{"../x":"-"}}`, `[]`}
	var want string
	check := func(method, host, body string) {
		t.Helper()
		resp, b := n.Do(method, "/v1/apps/console/domains/"+url.PathEscape(host)+"/paths", tok.Token, body)
		got := fmt.Sprintf("%d %s", resp.StatusCode, b)
		if want == "" {
			want = got
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "control") {
				t.Fatalf("%s %s: %s, want a 403 naming the control plane", method, host, got)
			}
		}
		if got != want {
			t.Errorf("%s %q body %s: %s, want %s", method, host, body, got, want)
		}
	}
	for _, h := range hosts {
		check("GET", h, "")
		for _, b := range bodies {
			check("PUT", h, b)
		}
	}
}
