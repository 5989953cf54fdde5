package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

var update = flag.Bool("update", false, "rewrite render/testdata/*.golden.json from the current render")

// goldenCase is render/testdata/<case>.json: a routing document as served (decoded with
// routing.Decode), an optional prefer node (applied with routing.Prefer, as the handler
// does for ?prefer=), and the render options (their Go names, matched by encoding/json
// case-insensitively: "entryPoints", "retryAttempts").
type goldenCase struct {
	Comment  string          `json:"comment"`
	Prefer   string          `json:"prefer"`
	Options  Options         `json:"options"`
	Document json.RawMessage `json:"document"`
}

type loadedCase struct {
	name string
	doc  *routing.Document
	opt  Options
}

func loadCases(t testing.TB) []loadedCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []loadedCase
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.json") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c goldenCase
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		doc, err := routing.Decode(c.Document)
		if err != nil {
			t.Fatalf("%s: document: %v", f, err)
		}
		if c.Prefer != "" {
			if doc, err = routing.Prefer(doc, c.Prefer); err != nil {
				t.Fatalf("%s: prefer: %v", f, err)
			}
		}
		out = append(out, loadedCase{
			name: strings.TrimSuffix(filepath.Base(f), ".json"),
			doc:  doc,
			opt:  c.Options,
		})
	}
	if len(out) == 0 {
		t.Fatal("no cases in testdata")
	}
	return out
}

// TestRenderMatchesGoldenFiles renders every testdata case and compares with its
// golden file. The render's output is compact; golden files hold it indented (with
// encoding/json's Indent, which changes only whitespace) so a reviewer can read them.
// go test ./render -update rewrites them.
func TestRenderMatchesGoldenFiles(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.name, func(t *testing.T) {
			out, err := Traefik(c.doc, c.opt)
			if err != nil {
				t.Fatalf("Traefik: %v", err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, out, "", "  "); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			pretty.WriteByte('\n')
			golden := filepath.Join("testdata", c.name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./render -update to create it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("render differs from %s (go test ./render -update rewrites it):\n%s", golden, lineDiff(string(want), pretty.String()))
			}
		})
	}
}

// lineDiff shows the first differing lines, enough to see what moved.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + w + "\n  got:  " + g
		}
	}
	return "(no line differs)"
}
