package testnode

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
)

// MetricAt is the value of the unlabelled series name in the /metrics of the node at
// base (http://host:port): a histogram's name_count, a gauge; -1 when it is not there.
func MetricAt(t testing.TB, base, name string) float64 {
	t.Helper()
	_, b := nodetest.Get(t, base+"/metrics", "")
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return -1
}

// PassesAt is how many reconcile passes, failed ones included, the node at base has
// run (scafo_reconcile_duration_seconds_count).
func PassesAt(t testing.TB, base string) int {
	t.Helper()
	return int(MetricAt(t, base, "scafo_reconcile_duration_seconds_count"))
}

// WaitPassesAt waits until the node at base has run k more reconcile passes than it
// had at the call, each at most every apart: a test asserting that something does not
// change waits on the passes that could have changed it, not on a guessed stretch of
// wall time.
func WaitPassesAt(t testing.TB, base string, k int, every time.Duration) {
	t.Helper()
	want := PassesAt(t, base) + k
	nodetest.WaitFor(t, 5*time.Second+time.Duration(k)*10*every, strconv.Itoa(k)+" more reconcile passes",
		func() bool { return PassesAt(t, base) >= want })
}

// Metric is MetricAt for n.
func (n *Node) Metric(name string) float64 {
	n.t.Helper()
	return MetricAt(n.t, n.URL, name)
}
