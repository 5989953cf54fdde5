package docs

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The performance plots of docs/performance.md, drawn from the tables of
// e2e/bench/REPORT.md (what `make report` measures and writes): never by hand.
// go run ./tools/docs/cmd/plots e2e/bench/REPORT.md docs/img writes them;
// TestPlotsAreDrawnFromTheReport fails when the SVGs and the report differ.

// Table is one markdown table of a report section: the header's cells and each row's.
type Table struct {
	Header []string
	Rows   [][]string
}

// col is the index of the first header cell that starts with name.
func (t Table) col(name string) int {
	for i, h := range t.Header {
		if strings.HasPrefix(h, name) {
			return i
		}
	}
	return -1
}

// SectionTables returns the tables of the report section whose heading starts with
// "## <prefix>", in order.
func SectionTables(report []byte, prefix string) []Table {
	var tables []Table
	in := false
	var cur *Table
	for _, l := range strings.Split(string(report), "\n") {
		if strings.HasPrefix(l, "## ") {
			in = strings.HasPrefix(l, "## "+prefix)
			cur = nil
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(l, "|") {
			cur = nil
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], "**", ""))
		}
		switch {
		case cur == nil:
			tables = append(tables, Table{Header: cells})
			cur = &tables[len(tables)-1]
		case strings.HasPrefix(cells[0], "---") || strings.HasPrefix(cells[0], ":-"):
		default:
			cur.Rows = append(cur.Rows, cells)
		}
	}
	return tables
}

func num(s string) (float64, error) {
	s = strings.TrimSuffix(strings.TrimSpace(s), "×")
	s = strings.ReplaceAll(s, " ", "")
	if f, _, ok := strings.Cut(s, "("); ok {
		s = f
	}
	return strconv.ParseFloat(s, 64)
}

// fleetSize reads "1 000 apps (round 2)" as 1000.
func fleetSize(s string) (float64, bool) {
	f, _, ok := strings.Cut(s, " apps")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(f, " ", ""), 64)
	return v, err == nil
}

// Series is one line of a plot.
type Series struct {
	Name   string
	Color  string
	Dashed bool
	X, Y   []float64
}

// Plots draws every plot from report: file name → SVG.
func Plots(report []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	flip, err := flipPlot(report)
	if err != nil {
		return nil, fmt.Errorf("flip latency (section 6): %w", err)
	}
	out["flip-latency-by-fleet-size.svg"] = flip
	store, err := storePlot(report)
	if err != nil {
		return nil, fmt.Errorf("store requests (section 7): %w", err)
	}
	out["store-requests-per-node-per-tick.svg"] = store
	poll, err := pollPlot(report)
	if err != nil {
		return nil, fmt.Errorf("poll throughput (section 1): %w", err)
	}
	out["poll-throughput-vs-nginx.svg"] = poll
	return out, nil
}

// flipPlot: p50 and p95 of a flip by fleet size, per provider, at the render's default
// health checks, every round of this tree averaged.
func flipPlot(report []byte) ([]byte, error) {
	ts := SectionTables(report, "6.")
	if len(ts) == 0 {
		return nil, fmt.Errorf("no table")
	}
	t := ts[0]
	fc, pc, hc, p50c, p95c := t.col("fleet"), t.col("provider"), t.col("health checks"), t.col("p50 s"), t.col("p95 s")
	if min(fc, pc, hc, p50c, p95c) < 0 {
		return nil, fmt.Errorf("columns fleet, provider, health checks, p50 s, p95 s not all found in %q", t.Header)
	}
	type key struct {
		provider string
		size     float64
	}
	sum := map[key][2]float64{}
	n := map[key]int{}
	for _, r := range t.Rows {
		if strings.Contains(r[fc], "before") || !strings.HasPrefix(r[hc], "render default") {
			continue
		}
		size, ok := fleetSize(r[fc])
		if !ok {
			return nil, fmt.Errorf("fleet %q", r[fc])
		}
		p50, err := num(r[p50c])
		if err != nil {
			return nil, err
		}
		p95, err := num(r[p95c])
		if err != nil {
			return nil, err
		}
		k := key{r[pc], size}
		s := sum[k]
		sum[k] = [2]float64{s[0] + p50, s[1] + p95}
		n[k]++
	}
	var series []Series
	for _, p := range []struct{ id, name, color string }{{"plugin", "plugin", "#1f77b4"}, {"http", "HTTP provider (1 s poll)", "#d62728"}} {
		var sizes []float64
		for k := range sum {
			if k.provider == p.id {
				sizes = append(sizes, k.size)
			}
		}
		sort.Float64s(sizes)
		if len(sizes) < 2 {
			return nil, fmt.Errorf("provider %s: %d fleet sizes", p.id, len(sizes))
		}
		s50 := Series{Name: p.name + " p50", Color: p.color, X: sizes}
		s95 := Series{Name: p.name + " p95", Color: p.color, Dashed: true, X: sizes}
		for _, x := range sizes {
			k := key{p.id, x}
			s50.Y = append(s50.Y, sum[k][0]/float64(n[k]))
			s95.Y = append(s95.Y, sum[k][1]/float64(n[k]))
		}
		series = append(series, s50, s95)
	}
	return lineSVG("Flip latency (PUT answered → first request on the new target)", "applications in the fleet", "seconds", series, true, true), nil
}

// storePlot: store requests per node per tick by fleet size, before and after.
func storePlot(report []byte) ([]byte, error) {
	ts := SectionTables(report, "7.")
	if len(ts) == 0 {
		return nil, fmt.Errorf("no table")
	}
	t := ts[0]
	bc, nc, rc := t.col("build"), t.col("nodes"), t.col("MinIO requests per node per tick")
	if min(bc, nc, rc) < 0 {
		return nil, fmt.Errorf("columns build, nodes, MinIO requests per node per tick not all found in %q", t.Header)
	}
	before := Series{Name: "before (every heartbeat bumped the serial)", Color: "#d62728"}
	after := Series{Name: "this tree", Color: "#1f77b4"}
	for _, r := range t.Rows {
		x, err := num(r[nc])
		if err != nil {
			return nil, err
		}
		y, err := num(r[rc])
		if err != nil {
			return nil, err
		}
		s := &after
		if strings.HasPrefix(r[bc], "before") {
			s = &before
		}
		s.X, s.Y = append(s.X, x), append(s.Y, y)
	}
	if len(before.X) < 2 || len(after.X) < 2 {
		return nil, fmt.Errorf("%d before and %d after rows", len(before.X), len(after.X))
	}
	return lineSVG("Store requests per node per tick on a real MinIO", "nodes on one bucket", "requests per node per tick", []Series{before, after}, false, false), nil
}

// pollPlot: node ÷ nginx requests a second, per fleet and representation.
func pollPlot(report []byte) ([]byte, error) {
	var bars []bar
	ts := SectionTables(report, "1.")
	fleets := []string{"10 000 routes", "10 000 routes\n+ 10 000 prefixes"}
	fi := 0
	for _, t := range ts {
		rc, nc, gc := t.col("representation"), t.col("node req/s"), t.col("nginx req/s")
		if min(rc, nc, gc) < 0 || t.col("body bytes") < 0 {
			continue // the controls table
		}
		if fi >= len(fleets) {
			break
		}
		for _, r := range t.Rows {
			node, err := num(r[nc])
			if err != nil {
				return nil, err
			}
			nginx, err := num(r[gc])
			if err != nil {
				return nil, err
			}
			bars = append(bars, bar{label: fleets[fi] + ", " + r[rc], value: node / nginx,
				note: fmt.Sprintf("%.0f vs %.0f req/s", node, nginx)})
		}
		fi++
	}
	if len(bars) < 2 {
		return nil, fmt.Errorf("%d measurements", len(bars))
	}
	return barSVG("Poll throughput: scafo-node ÷ nginx serving the same bytes", "node req/s ÷ nginx req/s", bars, 0.8, "goal 0.8×"), nil
}

const (
	plotW, plotH                              = 720, 420
	marginL, marginR, marginT, marginB        = 70, 20, 40, 110
	innerW, innerH                            = plotW - marginL - marginR, plotH - marginT - marginB
	svgHead                                   = `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">` + "\n"
	svgTail                                   = "</svg>\n"
	axisColor, gridColor, textColor    string = "#333", "#ddd", "#222"
)

func esc(s string) string { return html.EscapeString(s) }

func f1(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// ticks are round values covering [lo, hi]: powers of ten on a log axis, else about
// five steps of 1, 2 or 5 × 10^k.
func ticks(lo, hi float64, log bool) []float64 {
	var out []float64
	if log {
		for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
			out = append(out, math.Pow(10, e))
		}
		return out
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= 6 {
			step *= m
			break
		}
	}
	for v := math.Floor(lo/step) * step; v <= hi+step/2; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

func tickLabel(v float64) string {
	if v >= 1000 {
		s := strconv.FormatFloat(v, 'f', 0, 64)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteString(" ")
			}
			b.WriteRune(c)
		}
		return b.String()
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func lineSVG(title, xlabel, ylabel string, series []Series, logX, logY bool) []byte {
	var xs, ys []float64
	for _, s := range series {
		xs = append(xs, s.X...)
		ys = append(ys, s.Y...)
	}
	xlo, xhi := minMax(xs)
	ylo, yhi := minMax(ys)
	if !logY {
		ylo = 0
	}
	xt, yt := ticks(xlo, xhi, logX), ticks(ylo, yhi, logY)
	if !logX {
		xt = ticks(0, xhi, false)
	}
	xlo, xhi = xt[0], xt[len(xt)-1]
	ylo, yhi = yt[0], yt[len(yt)-1]
	scale := func(v, lo, hi float64, log bool) float64 {
		if log {
			v, lo, hi = math.Log10(v), math.Log10(lo), math.Log10(hi)
		}
		return (v - lo) / (hi - lo)
	}
	px := func(v float64) float64 { return marginL + scale(v, xlo, xhi, logX)*innerW }
	py := func(v float64) float64 { return marginT + (1-scale(v, ylo, yhi, logY))*innerH }

	var b bytes.Buffer
	fmt.Fprintf(&b, svgHead, plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" fill="%s">%s</text>`+"\n", marginL, textColor, esc(title))
	for _, v := range yt {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="%s"/>`+"\n", marginL, f1(y), marginL+innerW, f1(y), gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end" fill="%s">%s</text>`+"\n", marginL-6, f1(y+4), textColor, tickLabel(v))
	}
	for _, v := range xt {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="%s"/>`+"\n", f1(x), marginT, f1(x), marginT+innerH, gridColor)
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", f1(x), marginT+innerH+16, textColor, tickLabel(v))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", marginL, marginT, innerW, innerH, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", marginL+innerW/2, marginT+innerH+34, textColor, esc(xlabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n", marginT+innerH/2, textColor, esc(ylabel))
	for i, s := range series {
		var pts []string
		for j := range s.X {
			pts = append(pts, f1(px(s.X[j]))+","+f1(py(s.Y[j])))
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.Color, dash)
		for j := range s.X {
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s: %s</title></circle>`+"\n", f1(px(s.X[j])), f1(py(s.Y[j])), s.Color, esc(s.Name), tickLabel(s.Y[j]))
		}
		ly := marginT + innerH + 52 + (i/2)*18
		lx := marginL + (i%2)*(innerW/2)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly-4, lx+28, ly-4, s.Color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", lx+34, ly, textColor, esc(s.Name))
	}
	b.WriteString(svgTail)
	return b.Bytes()
}

type bar struct {
	label, note string
	value       float64
}

func barSVG(title, ylabel string, bars []bar, goal float64, goalLabel string) []byte {
	yhi := goal
	for _, br := range bars {
		yhi = max(yhi, br.value)
	}
	yt := ticks(0, math.Max(1.1, yhi*1.1), false)
	yhi = yt[len(yt)-1]
	py := func(v float64) float64 { return marginT + (1-v/yhi)*innerH }
	var b bytes.Buffer
	fmt.Fprintf(&b, svgHead, plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" fill="%s">%s</text>`+"\n", marginL, textColor, esc(title))
	for _, v := range yt {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="%s"/>`+"\n", marginL, f1(y), marginL+innerW, f1(y), gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end" fill="%s">%s</text>`+"\n", marginL-6, f1(y+4), textColor, tickLabel(v))
	}
	slot := float64(innerW) / float64(len(bars))
	for i, br := range bars {
		x := marginL + slot*float64(i) + slot*0.2
		y := py(br.value)
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="#1f77b4"><title>%s: %s×, %s</title></rect>`+"\n",
			f1(x), f1(y), f1(slot*0.6), f1(marginT+innerH-y), esc(strings.ReplaceAll(br.label, "\n", " ")), strconv.FormatFloat(math.Round(br.value*100)/100, 'f', 2, 64), esc(br.note))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" fill="%s">%s×</text>`+"\n", f1(x+slot*0.3), f1(y-6), textColor, strconv.FormatFloat(math.Round(br.value*100)/100, 'f', 2, 64))
		label, detail, _ := strings.Cut(br.label, ", ")
		lines := append([]string{detail}, strings.Split(label, "\n")...)
		for j, l := range lines {
			fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", f1(x+slot*0.3), marginT+innerH+16+16*j, textColor, esc(l))
		}
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" font-size="10" fill="%s">%s</text>`+"\n", f1(x+slot*0.3), marginT+innerH+16+16*len(lines), textColor, esc(br.note))
	}
	gy := py(goal)
	fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#d62728" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", marginL, f1(gy), marginL+innerW, f1(gy))
	fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end" fill="#d62728">%s</text>`+"\n", marginL+innerW-4, f1(gy-6), esc(goalLabel))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", marginL, marginT, innerW, innerH, axisColor)
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n", marginT+innerH/2, textColor, esc(ylabel))
	b.WriteString(svgTail)
	return b.Bytes()
}

func minMax(v []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}
