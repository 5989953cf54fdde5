package main

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTheFrontRefusesABadSettingNamingItAndExits78: `scafo-node front` checks its file
// and flags as strictly as the node: an unknown flag, a value out of its bounds and a
// missing token each exit 78 with the setting named (and its source); a SCAFO_*
// variable is not one of its settings and is ignored, but SCAFO_INGRESS_TOKEN gives the
// token, and the front then serves.
func TestTheFrontRefusesABadSettingNamingItAndExits78(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		args []string
		env  []string
		want []string
	}{
		{[]string{"--bogus=1", "--token=x"}, nil, []string{"unknown flag --bogus"}},
		{[]string{"--tcp.maxHello=10", "--token=x"}, nil, []string{"tcp.maxHello 10", "from flag --tcp.maxHello"}},
		{[]string{"--listen.tcp=127.0.0.1:0"}, nil, []string{"token: empty"}},
		{[]string{"--listen.tcp=127.0.0.1:0"}, []string{"SCAFO_TOKEN=x"}, []string{"token: empty"}},
	} {
		cmd := exec.Command(bin, append([]string{"front"}, tc.args...)...)
		cmd.Env = append(envWithoutScafo(), tc.env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
			t.Errorf("front %v: %v, want exit %d\n%s", tc.args, err, exitConfig, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("front %v: %q not in\n%s", tc.args, w, out)
			}
		}
	}

	cmd := exec.Command(bin, "front", "--listen.tcp=127.0.0.1:0", "--listen.udp=127.0.0.1:0", "--nodes=http://127.0.0.1:1")
	cmd.Env = append(envWithoutScafo(), "SCAFO_INGRESS_TOKEN=from-the-environment")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var seen []string
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if strings.Contains(sc.Text(), `msg="front serving"`) {
				serving <- sc.Text()
				return
			}
		}
		serving <- "exited: " + strings.Join(seen, "\n")
	}()
	select {
	case line := <-serving:
		if !strings.Contains(line, "front serving") {
			t.Fatalf("the front with SCAFO_INGRESS_TOKEN did not serve: %s", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the front did not say it serves within 30 s")
	}
}
