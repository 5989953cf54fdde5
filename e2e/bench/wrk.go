package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkLoad is the load every comparison uses on both sides: the same threads,
// connections and duration (SCAFO_BENCH_WRK="-t2 -c32 -d10s" overrides the defaults).
type wrkLoad struct {
	threads, conns int
	duration       time.Duration
}

func (l wrkLoad) String() string {
	return fmt.Sprintf("-t%d -c%d -d%s", l.threads, l.conns, l.duration)
}

// wrkResult is what one wrk run reports.
type wrkResult struct {
	requests     int64
	reqPerSec    float64
	p50, p99     time.Duration
	non2xx       int64  // "Non-2xx or 3xx responses"
	socketErrors string // "" when none
	transfer     string // "Transfer/sec"
}

// runWrk runs wrk against url with headers ("Name: value").
func runWrk(t *task, load wrkLoad, url string, headers ...string) wrkResult {
	args := []string{
		"-t" + itoa(load.threads), "-c" + itoa(load.conns),
		"-d" + strconv.Itoa(int(load.duration.Seconds())) + "s",
		"--latency", "--timeout", "10s",
	}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	args = append(args, url)
	out, err := exec.Command(bins.wrk, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		t.Fatalf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return r
}

var (
	wrkReqSec    = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkTotal     = regexp.MustCompile(`(?m)^\s*([0-9]+) requests in `)
	wrkPct       = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkNon2xx    = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+([0-9]+)`)
	wrkSocketErr = regexp.MustCompile(`(?m)^\s*Socket errors:\s+(.+)$`)
	wrkTransfer  = regexp.MustCompile(`(?m)^Transfer/sec:\s+(\S+)`)
)

// parseWrk reads wrk 4.x output (with --latency).
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := wrkReqSec.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("parsing wrk output: no Requests/sec line")
	}
	r.reqPerSec, _ = strconv.ParseFloat(m[1], 64)
	if m := wrkTotal.FindStringSubmatch(out); m != nil {
		r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	}
	pcts := wrkPct.FindAllStringSubmatch(out, -1)
	for _, m := range pcts {
		v, _ := strconv.ParseFloat(m[2], 64)
		unit := map[string]float64{"us": 1e3, "ms": 1e6, "s": 1e9}[m[3]]
		d := time.Duration(v * unit)
		if m[1] == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	if len(pcts) < 2 {
		return r, fmt.Errorf("parsing wrk output: no 50%% and 99%% latency lines (run with --latency)")
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		r.non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := wrkSocketErr.FindStringSubmatch(out); m != nil {
		r.socketErrors = strings.TrimSpace(m[1])
	}
	if m := wrkTransfer.FindStringSubmatch(out); m != nil {
		r.transfer = m[1]
	}
	return r, nil
}

// defaultLoad is -t2 -c32 -d<seconds>, overridable by SCAFO_BENCH_WRK ("-t2 -c64 -d5s").
func defaultLoad(t *task, seconds int) wrkLoad {
	l := wrkLoad{threads: 2, conns: 32, duration: time.Duration(seconds) * time.Second}
	if v := os.Getenv("SCAFO_BENCH_WRK"); v != "" {
		for _, f := range strings.Fields(v) {
			var err error
			switch {
			case strings.HasPrefix(f, "-t"):
				l.threads, err = strconv.Atoi(f[2:])
			case strings.HasPrefix(f, "-c"):
				l.conns, err = strconv.Atoi(f[2:])
			case strings.HasPrefix(f, "-d"):
				l.duration, err = time.ParseDuration(f[2:])
			default:
				err = fmt.Errorf("unknown flag")
			}
			if err != nil {
				t.Fatalf("SCAFO_BENCH_WRK: %q: %v", f, err)
			}
		}
	}
	return l
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) }

// runWrkScript runs wrk with a Lua script that builds each request.
func runWrkScript(t *task, load wrkLoad, url, script string) wrkResult {
	args := []string{
		"-t" + itoa(load.threads), "-c" + itoa(load.conns),
		"-d" + strconv.Itoa(int(load.duration.Seconds())) + "s",
		"--latency", "--timeout", "10s", "-s", script, url,
	}
	out, err := exec.Command(bins.wrk, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		t.Fatalf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return r
}
