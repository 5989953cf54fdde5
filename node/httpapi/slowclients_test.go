package httpapi_test

// Hostile clients (docs/design.md §5): connections held without a token, on a real
// listener. Floods of rejected credentials and refusals whatever the request's shape are
// rejected_test.go's, in process.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/node/httpapi"
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
			auth = "Authorization: Bearer " + ipIngress + "\r\n"
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

	// The API on a listener capped as the node caps it from that limit (limits.maxConns
	// and its reserve derived, the per-source cap of one address).
	total, reserved := httpapi.LimitsConfig{}.Conns()
	general := total - reserved
	n := listenAPI(t, total, reserved, httpapi.LimitsConfig{}.PerSource(general), time.Minute, nil)
	url := "http://" + n.addr

	// The attack, from another process.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSlowClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), envSlowAddr+"="+n.addr, envSlowCount+"="+strconv.Itoa(attackers))
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

	// Every slow client's connection reached the listener: what follows is served while
	// they hold their ends open (each is answered and cut within rejectDrain, so the
	// general part is full only for a moment, if at all).
	c := n.waitFor(t, "every slow client accepted", func(c connCounts) bool { return c.accepted >= attackers })
	t.Logf("%d connections accepted, %d open at most (%d general)", c.accepted, c.peak, general)

	// While the slow clients hold their connections, Traefik's polls (a new connection
	// each, the hardest case) and readiness probes keep answering in their normal time.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	probe := func(path, token string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
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
	// Rounds back to back, each on new connections while the previous round's may still
	// hold their slots (a poll then waits for one in the accept queue, as behind a
	// burst).
	const rounds = 30
	polls := 0
	for polls < rounds {
		code, err := probe("/v1/ingress/routes", ipIngress)
		if err != nil || code != http.StatusOK {
			t.Fatalf("poll %d under attack: %d %v", polls, code, err)
		}
		code, err = probe("/v1/readyz", "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("readyz %d under attack: %d %v", polls, code, err)
		}
		polls++
	}
	t.Logf("%d polls and readiness probes answered while %d slow-body connections were open", polls, attackers)
}
