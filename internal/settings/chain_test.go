package settings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
