package settings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/traefik/paerser/cli"
)

// chained is a configuration with a file setting, as a program's root command has.
type chained struct {
	ConfigFile string `json:"configFile,omitempty"`
	Name       string `json:"name,omitempty"`
	Sub        struct {
		Count int    `json:"count,omitempty"`
		Token string `json:"token,omitempty"`
	} `json:"sub"`
}

// load runs the chain as paerser does: each loader in turn until one says done or
// fails.
func load(t *testing.T, c Chain, args []string) (*chained, error) {
	t.Helper()
	cfg := &chained{}
	cmd := &cli.Command{Name: "x", Configuration: cfg}
	for _, l := range c.Loaders() {
		done, err := l.Load(args, cmd)
		if err != nil {
			return cfg, err
		}
		if done {
			return cfg, nil
		}
	}
	t.Fatal("the chain ended without its finish")
	return nil, nil
}

// TestChainReadsEverySourceInOrder: the file, then the variables, then the flags, each
// overriding the earlier field by field; an alias reads as its path; a variable of
// another program is neither refused nor read; Finish sees the result and its error
// ends the chain.
func TestChainReadsEverySourceInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(path, []byte("name: from-file\nsub:\n  count: 1\n  token: file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var finished *chained
	c := Chain{
		Environ:    []string{"X_CONFIGFILE=" + path, "X_SUB_COUNT=2", "X_SUB_TOKEN=env-token", "X_OTHER_TOOL=1"},
		EnvPrefix:  "X_",
		NotSetting: func(name string) bool { return name == "X_OTHER_TOOL" },
		Aliases:    map[string]string{"token": "sub.token"},
		Finish:     func(cfg any, _ *Origins) error { finished = cfg.(*chained); return nil },
	}
	cfg, err := load(t, c, []string{"--token=flag-token"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "from-file" || cfg.Sub.Count != 2 || cfg.Sub.Token != "flag-token" {
		t.Errorf("loaded %+v, want name from the file, count from the environment, token from the flag alias", *cfg)
	}
	if finished != cfg {
		t.Error("Finish did not see the loaded configuration")
	}
	c.Finish = func(any, *Origins) error { return errors.New("sub.count: too small") }
	if _, err := load(t, c, nil); err == nil || err.Error() != "sub.count: too small" {
		t.Errorf("Finish's error: %v", err)
	}
}

// TestChainRefusesBeforeReading: a misspelled flag, variable or file key, and a removed
// setting, are refused by the strict check, all at once, each naming its source; the
// configuration is left as it was (nothing read).
func TestChainRefusesBeforeReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(path, []byte("nmae: typo\nsub:\n  old: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Chain{
		Environ:   []string{"X_SUB_CONUT=2"},
		EnvPrefix: "X_",
		Removed:   map[string]string{"sub.old": "delete it"},
		Finish:    func(any, *Origins) error { t.Error("Finish ran after a refusal"); return nil },
	}
	cfg, err := load(t, c, []string{"--configFile=" + path, "--nmae=x"})
	if err == nil {
		t.Fatal("nothing refused")
	}
	for _, want := range []string{"--nmae", "X_SUB_CONUT", "nmae in " + path, "sub.old", "delete it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	if cfg.Name != "" || cfg.Sub.Count != 0 {
		t.Errorf("a refused chain read %+v", *cfg)
	}
}

// TestTheFileIsOpenedOnce (hostile review 2): the chain decodes the bytes its bounded,
// checked read took and never opens the file again. A FIFO that answers its first open
// with a valid file would have answered a second one with anything (100 MiB, unknown
// keys), unbounded and unchecked.
func TestTheFileIsOpenedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := make(chan int, 1)
	go func() { // the writer end: one open, then it counts whether a second reader comes
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			opened <- -1
			return
		}
		f.WriteString("name: first-open\n")
		f.Close()
		opened <- 1
	}()
	c := Chain{EnvPrefix: "X_", Finish: func(any, *Origins) error { return nil }}
	cfg, err := load(t, c, []string{"--configFile=" + path})
	if err != nil {
		t.Fatal(err)
	}
	if n := <-opened; n != 1 || cfg.Name != "first-open" {
		t.Fatalf("writer %d, name %q; want the first open's file", n, cfg.Name)
	}
	// A second reader would be waiting on the FIFO now: a non-blocking writer open
	// finds none (ENXIO) when the chain opened the file once.
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil {
		f.Close()
		t.Fatal("the chain opened the configuration file a second time")
	}
	if !errors.Is(err, syscall.ENXIO) {
		t.Fatalf("opening the FIFO for writing: %v, want ENXIO (no reader)", err)
	}
}
