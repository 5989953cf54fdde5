package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

const operatingPage = "../../docs/operating.md"

// The metrics table of docs/operating.md is generated from the node's sources: a metric
// added, renamed or re-described, and the table differs until it is regenerated
// (-update).
func TestMetricsReferenceIsGeneratedFromTheCode(t *testing.T) {
	ms, err := Metrics(filepath.Join(root, "node"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 15 {
		t.Fatalf("found %d metrics in node/: the scan is broken", len(ms))
	}
	page := mustRead(t, operatingPage)
	want, err := replaceBlock(page, "metrics", MetricsMarkdown(ms))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(operatingPage, want, 0o644); err != nil {
			t.Fatal(err)
		}
		page = want
	}
	if !bytes.Equal(page, want) {
		t.Fatal("docs/operating.md's metrics table differs from the metrics node/ defines (go test ./tools/docs -run Metrics -update)")
	}
}

// Every metric a page names is one the node defines: a renamed metric leaves no page
// telling an operator to graph a series that does not exist.
func TestEveryMetricTheDocsNameExists(t *testing.T) {
	ms, err := Metrics(filepath.Join(root, "node"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range ms {
		known[m.Name] = true
	}
	pages := docPages(t)
	name := regexp.MustCompile(`\bscafo_[a-z_]*[a-z]\b`)
	for _, p := range pages {
		b := mustRead(t, p)
		for _, m := range name.FindAll(b, -1) {
			if n := string(m); !known[n] && n != "scafo_retry" {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s names metric %s, which node/ does not define", rel, n)
			}
		}
	}
}
