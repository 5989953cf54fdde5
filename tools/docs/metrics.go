package docs

import (
	"bytes"
	"fmt"
	"github.com/scafo/ingress/node/api"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Metric is one Prometheus metric the node defines, as its source declares it.
type Metric struct {
	Name, Help, File string
}

var (
	// A help text may start with a route path constant of node/api (api.PathStorage + "…").
	metricOptsRE = regexp.MustCompile(`Name:\s*"(scafo_[a-z_]+)",\s*Help:\s*(?:api\.(Path[A-Za-z]+)\s*\+\s*)?("(?:[^"\\]|\\.)*")`)
	metricDescRE = regexp.MustCompile(`NewDesc\(\s*"(scafo_[a-z_]+)",\s*()("(?:[^"\\]|\\.)*")`)
	// helpPaths are the node/api constants a help text may start with.
	helpPaths = map[string]string{"PathStorage": api.PathStorage}
)

// Metrics reads every metric the node's non-test sources under dir define
// (prometheus.*Opts{Name, Help} and prometheus.NewDesc), sorted by name.
func Metrics(dir string) ([]Metric, error) {
	var out []Metric
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		for _, re := range []*regexp.Regexp{metricOptsRE, metricDescRE} {
			for _, m := range re.FindAllSubmatch(b, -1) {
				help, err := strconv.Unquote(string(m[3]))
				if err != nil {
					return fmt.Errorf("%s: %s: %w", p, m[1], err)
				}
				if c := string(m[2]); c != "" {
					v, ok := helpPaths[c]
					if !ok {
						return fmt.Errorf("%s: %s: help starts with api.%s, which helpPaths does not know", p, m[1], c)
					}
					help = v + help
				}
				out = append(out, Metric{Name: string(m[1]), Help: help, File: filepath.ToSlash(rel)})
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// MetricsMarkdown is the generated metrics table of docs/operating.md.
func MetricsMarkdown(ms []Metric) []byte {
	var b bytes.Buffer
	b.WriteString("| metric | what it says |\n|---|---|\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "| `%s` | %s |\n", m.Name, escapeCell(m.Help))
	}
	return b.Bytes()
}

// Generated blocks in a page: between a line starting "<!-- generated: <name>" and
// the line "<!-- generated end -->".
func replaceBlock(page []byte, name string, body []byte) ([]byte, error) {
	start := []byte("<!-- generated: " + name)
	i := bytes.Index(page, start)
	if i < 0 {
		return nil, fmt.Errorf("no %q block", start)
	}
	nl := bytes.Index(page[i:], []byte("-->\n"))
	if nl < 0 {
		return nil, fmt.Errorf("%q block: the opening comment does not end", start)
	}
	from := i + nl + len("-->\n")
	end := bytes.Index(page[from:], []byte("<!-- generated end -->"))
	if end < 0 {
		return nil, fmt.Errorf("%q block: no <!-- generated end -->", start)
	}
	out := append([]byte{}, page[:from]...)
	out = append(out, body...)
	return append(out, page[from+end:]...), nil
}
