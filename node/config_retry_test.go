package node_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render"
)

// TestConfigRetry: --traefik.retry.* default to the render's defaults, read from flags
// and the environment, and a bad value is refused naming it: an explicit 0 attempts
// by the config (the render would read it as its default), the render's own bounds
// when the node starts.
func TestConfigRetry(t *testing.T) {
	cfg, err := loadConfig(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := node.RetryConfig{Attempts: render.DefaultRetryAttempts, InitialInterval: ptypes.Duration(200 * time.Millisecond)}
	if cfg.Traefik.Retry != want || time.Duration(want.InitialInterval).String() != render.DefaultRetryInitialInterval {
		t.Errorf("default retry %+v, want %+v (render's %d × %s)", cfg.Traefik.Retry, want, render.DefaultRetryAttempts, render.DefaultRetryInitialInterval)
	}
	for _, tc := range []struct {
		name          string
		args, environ []string
		want          node.RetryConfig
		wantErr       string
	}{
		{name: "flags", args: []string{"--traefik.retry.attempts=5", "--traefik.retry.initialInterval=1s"},
			want: node.RetryConfig{Attempts: 5, InitialInterval: ptypes.Duration(time.Second)}},
		{name: "environment", environ: []string{"SCAFO_TRAEFIK_RETRY_ATTEMPTS=3", "SCAFO_TRAEFIK_RETRY_INITIALINTERVAL=300ms"},
			want: node.RetryConfig{Attempts: 3, InitialInterval: ptypes.Duration(300 * time.Millisecond)}},
		{name: "off", args: []string{"--traefik.retry.attempts=1"},
			want: node.RetryConfig{Attempts: 1, InitialInterval: ptypes.Duration(200 * time.Millisecond)}},
		{name: "zero attempts", args: []string{"--traefik.retry.attempts=0"}, wantErr: "traefik.retry.attempts"},
		{name: "negative attempts", args: []string{"--traefik.retry.attempts=-2"}, wantErr: "traefik.retry.attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(t, tc.args, tc.environ)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Traefik.Retry != tc.want {
				t.Errorf("loaded %+v, want %+v", cfg.Traefik.Retry, tc.want)
			}
		})
	}
	// The render's bounds, checked when the node is built.
	for _, tc := range []struct {
		name    string
		retry   node.RetryConfig
		wantErr string
	}{
		{"zero interval", node.RetryConfig{Attempts: 3}, "retry.initialInterval"},
		{"interval too long", node.RetryConfig{Attempts: 3, InitialInterval: ptypes.Duration(time.Minute)}, "retry.initialInterval"},
		{"too many attempts", node.RetryConfig{Attempts: render.MaxRetryAttempts + 1, InitialInterval: ptypes.Duration(time.Second)}, "retry.attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "vps-a", t.TempDir())
			cfg.Traefik.Retry = tc.retry
			st, err := dir.New(cfg.Store.Dir.Path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = node.NewWithStore(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), st, testIngressToken, testAdminToken)
			if err == nil || !strings.Contains(err.Error(), "traefik render options") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewWithStore: %v, want the render options refused naming %s", err, tc.wantErr)
			}
		})
	}
}
