package traefikprovider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scafo/ingress/traefikprovider/localplugin"
)

var yaegiInstall struct {
	once   sync.Once
	goPath string
	err    error
}

// yaegiGoPath returns a GOPATH holding this package's sources as Traefik's
// plugins-local directory would, installed once per test binary.
func yaegiGoPath(t *testing.T) string {
	t.Helper()
	yaegiInstall.once.Do(func() {
		dir, err := os.MkdirTemp("", "traefikprovider-yaegi-")
		if err != nil {
			yaegiInstall.err = err
			return
		}
		yaegiInstall.goPath = dir
		_, yaegiInstall.err = localplugin.Install(".", dir)
	})
	if yaegiInstall.err != nil {
		t.Fatalf("installing the plugin for Yaegi: %v", yaegiInstall.err)
	}
	return yaegiInstall.goPath
}

func TestMain(m *testing.M) {
	before, _ := filepath.Glob("*.last.json")
	code := m.Run()
	if yaegiInstall.goPath != "" {
		_ = os.RemoveAll(yaegiInstall.goPath)
	}
	// No test may leave a state file in the package directory (the default stateFile
	// is relative to the working directory): one was committed that way, and a stale
	// one would be loaded by a later run's plugin whose first polls fail.
	if after, _ := filepath.Glob("*.last.json"); code == 0 && len(after) > len(before) {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left state files in the package directory: %v\n", after)
		code = 1
	}
	os.Exit(code)
}

// lineWriter turns the interpreter's stdout or stderr into logBuf lines.
type lineWriter struct {
	logs *logBuf
	warn bool
	mu   sync.Mutex
	part []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.logs.add(w.warn, string(w.part[:i]))
		w.part = w.part[i+1:]
	}
}

// syncBuffer is a bytes.Buffer safe for the interpreter's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPluginRunsUnderYaegi loads this package's sources into the Yaegi interpreter
// the way Traefik v3.6 does (manifest, import, CreateConfig, decode, New through the
// PP wrapper), with the settings as Traefik passes them from TRAEFIK_* variables
// (strings only) and the token from the plugin's environment, and an unbuffered
// channel as Traefik's. Every behaviour test also runs under Yaegi
// (forEachRuntime); a construct Yaegi cannot run fails CI.
func TestPluginRunsUnderYaegi(t *testing.T) {
	goPath := yaegiGoPath(t)

	first := routerConfig("shop.example.com", "http://10.83.0.1:24417")
	node := newFakeNode(t, first)
	var stdout, stderr syncBuffer
	prov, err := localplugin.LoadWithYaegi(goPath, map[string]any{
		// As Traefik hands them over from TRAEFIK_PROVIDERS_PLUGIN_SCAFO_* variables:
		// lower-case keys, strings only; the token comes from SCAFO_INGRESS_TOKEN.
		"endpoints":    closedURL(t) + "," + node.URL(),
		"prefer":       "vps-a",
		"pollinterval": "1h",
		"watch":        "true",
		"watchwait":    "30s",
		// Never the default (<provider>.last.json in the working directory): that is
		// this package's source directory under go test (a file was committed so).
		"statefile": filepath.Join(t.TempDir(), "scafo.last.json"),
	}, localplugin.YaegiOptions{
		Env:    []string{"SCAFO_INGRESS_TOKEN=" + testToken},
		Stdout: &stdout,
		Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("loading under Yaegi: %v", err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("plugin stdout:\n%s\nplugin stderr:\n%s", stdout.String(), stderr.String())
		}
	}()

	if err := prov.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	// Unbuffered, as in Traefik.
	cfgChan := make(chan json.Marshaler)
	if err := prov.Provide(cfgChan); err != nil {
		t.Fatalf("Provide: %v", err)
	}
	t.Cleanup(func() { _ = prov.Stop() })

	receive := func(want string) {
		t.Helper()
		select {
		case m := <-cfgChan:
			raw, err := m.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			// What Traefik does next: decode into its dynamic configuration.
			var decoded struct {
				HTTP struct {
					Routers map[string]json.RawMessage `json:"routers"`
				} `json:"http"`
			}
			if err := json.Unmarshal(raw, &decoded); err != nil {
				t.Fatalf("emitted configuration does not decode: %v", err)
			}
			if string(raw) != want {
				t.Fatalf("emitted %s, want %s", raw, want)
			}
		case <-time.After(wait):
			t.Fatalf("no configuration within %s", wait)
		}
	}

	receive(first)
	if !strings.Contains(stderr.String(), "switching to "+node.URL()) {
		t.Errorf("the switch is not logged on stderr (Traefik: ERROR level)")
	}
	if !strings.Contains(stdout.String(), "configuration "+etagOf(first)) {
		t.Errorf("the emitted configuration is not logged on stdout (Traefik: DEBUG level)")
	}

	// The token from the plugin's environment, the lower-case prefer setting. (A change
	// by long-poll and Stop under Yaegi: forEachRuntime's TestLongPollDeliversChangeAtOnce
	// and TestStopReturnsPromptly.)
	for i, r := range node.Requests() {
		if r.Auth != "Bearer "+testToken || r.Prefer != "vps-a" {
			t.Errorf("request %d: Authorization %q prefer %q", i, r.Auth, r.Prefer)
		}
	}
	if err := prov.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestManifestPassesTraefikChecks(t *testing.T) {
	m, err := localplugin.ReadManifest(".")
	if err != nil {
		t.Fatal(err)
	}
	if m.Import != localplugin.ModuleName {
		t.Errorf("import %q, want %q (the package's own import path)", m.Import, localplugin.ModuleName)
	}
}
