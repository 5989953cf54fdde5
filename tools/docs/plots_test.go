package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The SVGs in docs/img are what the plotter draws from e2e/bench/REPORT.md: a plot
// edited by hand, or a report re-measured without redrawing, differs (-update redraws).
func TestPlotsAreDrawnFromTheReport(t *testing.T) {
	report := mustRead(t, filepath.Join(root, "e2e", "bench", "REPORT.md"))
	plots, err := Plots(report)
	if err != nil {
		t.Fatal(err)
	}
	perf := mustRead(t, filepath.Join(root, "docs", "performance.md"))
	for name, want := range plots {
		p := filepath.Join(root, "docs", "img", name)
		if *update {
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got := mustRead(t, p)
		if !bytes.Equal(got, want) {
			t.Errorf("docs/img/%s is not what the plotter draws from e2e/bench/REPORT.md (go test ./tools/docs -run Plots -update)", name)
		}
		if !strings.Contains(string(perf), "img/"+name) {
			t.Errorf("docs/performance.md does not show img/%s", name)
		}
	}
}

// The plots read the report's own numbers: a changed measurement moves the drawing.
func TestPlotsFollowTheMeasurements(t *testing.T) {
	report := mustRead(t, filepath.Join(root, "e2e", "bench", "REPORT.md"))
	before, err := Plots(report)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(report, []byte("| this tree | 12 | **1.24** |"), []byte("| this tree | 12 | **3.50** |"), 1)
	if bytes.Equal(changed, report) {
		t.Fatal("the report has no 12-node row to change")
	}
	after, err := Plots(changed)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before["store-requests-per-node-per-tick.svg"], after["store-requests-per-node-per-tick.svg"]) {
		t.Error("the store plot did not move with the 12-node measurement")
	}
	if _, err := Plots([]byte("# no sections\n")); err == nil {
		t.Error("a report without the measured sections drew plots")
	}
}
