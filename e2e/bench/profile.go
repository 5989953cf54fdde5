package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// perfTop samples pid with `perf record` (user and kernel stacks) while load runs and
// returns the hottest symbols, self time, as markdown table rows. Empty when perf is
// missing or not permitted: the profile is an aid, not a measurement.
func perfTop(t *task, pid int, d time.Duration, n int, load func()) []string {
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Log("perf not installed: no profile")
		return nil
	}
	data := filepath.Join(t.TempDir(), "perf.data")
	rec := exec.Command(perf, "record", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", data, "--", "sleep", strconv.Itoa(int(d.Seconds())))
	var recOut bytes.Buffer
	rec.Stdout, rec.Stderr = &recOut, &recOut
	if err := rec.Start(); err != nil {
		t.Logf("perf record: %v", err)
		return nil
	}
	load()
	if err := rec.Wait(); err != nil {
		t.Logf("perf record: %v\n%s", err, recOut.String())
		return nil
	}
	out, err := exec.Command(perf, "report", "-i", data, "--stdio", "--no-children", "-g", "none",
		"--sort", "dso,symbol", "--percent-limit", "0.5").Output()
	if err != nil {
		t.Logf("perf report: %v", err)
		return nil
	}
	rows := parsePerfReport(out, n)
	// The split by object: how much is the kernel's (copies, TCP) and how much ours.
	if byDSO, err := exec.Command(perf, "report", "-i", data, "--stdio", "--no-children", "-g", "none",
		"--sort", "dso", "--percent-limit", "1").Output(); err == nil {
		var parts []string
		sc := bufio.NewScanner(bytes.NewReader(byDSO))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && strings.HasSuffix(f[0], "%") {
				parts = append(parts, f[1]+" "+f[0])
			}
		}
		if len(parts) > 0 {
			rows = append(rows, "| | | by object: "+strings.Join(parts, ", ")+" | |")
		}
	}
	return rows
}

// parsePerfReport turns `perf report --stdio --sort dso,symbol -g none` lines
// ("  12.34%  scafo-node  [.] runtime.memmove") into markdown rows.
func parsePerfReport(out []byte, n int) []string {
	var rows []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() && len(rows) < n {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || !strings.Contains(line, "%") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasSuffix(f[0], "%") {
			continue
		}
		where := "user"
		if f[2] == "[k]" {
			where = "kernel"
		}
		sym := strings.TrimSpace(strings.TrimSuffix(strings.Join(f[3:], " "), " - -"))
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | `%s` |", f[0], where, f[1], sym))
	}
	return rows
}

// profileEnabled adds perf profiles of the node under load: set when perf is on PATH,
// unless SCAFO_BENCH_PROFILE=0.
var profileEnabled bool
