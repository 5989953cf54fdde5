// Command plots draws the performance plots of docs/performance.md from the tables of
// the performance report: go run ./tools/docs/cmd/plots e2e/bench/REPORT.md docs/img
// (what `make report` runs after writing the report).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/scafo/ingress/tools/docs"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: plots <REPORT.md> <output dir>")
		os.Exit(2)
	}
	report, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "plots:", err)
		os.Exit(1)
	}
	plots, err := docs.Plots(report)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plots:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(plots))
	for n := range plots {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(os.Args[2], n)
		if err := os.WriteFile(p, plots[n], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "plots:", err)
			os.Exit(1)
		}
		fmt.Println("plots: wrote", p)
	}
}
