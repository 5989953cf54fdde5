package node_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/internal/statedir"
)

// The ways a token could be accepted for two roles. Each case spells its tokens
// as a file, variables and flags for the loader, and as a Config for node.New.
var bothRolesCases = []struct {
	name string
	yaml string // the file's content (%s: the shared token)
	env  []string
	args []string
	// the same tokens, as a configuration built in code (readOnly: testConfig's when empty)
	ingress, admin, readOnly node.TokenConfig
	want                     []string // what the loader's refusal names (settings and sources; FILE: the file)
	wantNew                  []string // what node.New's names
}{
	{
		name: "the admin token is the ingress token",
		yaml: "ingress:\n  token: %s\n", env: []string{"SCAFO_ADMIN_TOKEN=" + shared},
		ingress: node.TokenConfig{Token: shared}, admin: node.TokenConfig{Token: shared},
		want:    []string{"admin.token", "ingress.token", "SCAFO_ADMIN_TOKEN in the environment", "ingress.token in FILE"},
		wantNew: []string{"admin.token and ingress.token hold the same token"},
	},
	{
		name: "the admin token is in ingress.previous",
		yaml: "ingress:\n  previous: [%s]\n", env: []string{"SCAFO_ADMIN_TOKEN=" + shared},
		ingress: node.TokenConfig{Token: other, Previous: []string{shared}}, admin: node.TokenConfig{Token: shared},
		want:    []string{"admin.token", "ingress.previous[0]", "SCAFO_ADMIN_TOKEN in the environment", "ingress.previous in FILE"},
		wantNew: []string{"admin.token and ingress.previous[0] hold the same token"},
	},
	{
		name: "the ingress token is in admin.previous",
		env:  []string{"SCAFO_ADMIN_PREVIOUS=" + other + "," + shared}, args: []string{"--ingress-token=" + shared},
		ingress: node.TokenConfig{Token: shared}, admin: node.TokenConfig{Token: third, Previous: []string{other, shared}},
		want:    []string{"admin.previous[1]", "ingress.token", "SCAFO_ADMIN_PREVIOUS in the environment", "flag --ingress-token"},
		wantNew: []string{"admin.previous[1] and ingress.token hold the same token"},
	},
	{
		name: "the previous lists share a token",
		yaml: "admin:\n  previous:\n    - %s\n", args: []string{"--ingress.previous=" + shared},
		ingress: node.TokenConfig{Token: other, Previous: []string{shared}}, admin: node.TokenConfig{Token: third, Previous: []string{shared}},
		want:    []string{"admin.previous[0]", "ingress.previous[0]", "admin.previous in FILE", "flag --ingress.previous"},
		wantNew: []string{"admin.previous[0] and ingress.previous[0] hold the same token"},
	},
	{
		name:  "the read-only token is the admin token",
		env:   []string{"SCAFO_ADMIN_TOKEN=" + shared, "SCAFO_READONLY_TOKEN=" + shared},
		admin: node.TokenConfig{Token: shared}, ingress: node.TokenConfig{Token: other}, readOnly: node.TokenConfig{Token: shared},
		want:    []string{"admin.token and readonly.token hold the same token", "admin.token from SCAFO_ADMIN_TOKEN in the environment", "readonly.token from SCAFO_READONLY_TOKEN in the environment"},
		wantNew: []string{"admin.token and readonly.token hold the same token"},
	},
	{
		name:  "the ingress token is in readonly.previous",
		env:   []string{"SCAFO_INGRESS_TOKEN=" + shared, "SCAFO_READONLY_PREVIOUS=" + shared},
		admin: node.TokenConfig{Token: third}, ingress: node.TokenConfig{Token: shared}, readOnly: node.TokenConfig{Token: other, Previous: []string{shared}},
		want:    []string{"ingress.token and readonly.previous[0] hold the same token", "ingress.token from SCAFO_INGRESS_TOKEN in the environment", "readonly.previous from SCAFO_READONLY_PREVIOUS in the environment"},
		wantNew: []string{"ingress.token and readonly.previous[0] hold the same token"},
	},
}

const (
	shared = "shared-token-0123456789"
	other  = "other-token-0123456789"
	third  = "third-token-0123456789"
)

// TestNoTokenIsAcceptedForBothRoles: a token the admin role accepts (admin.token,
// admin.previous) that the ingress role accepts too (ingress.token, ingress.previous)
// let every ingress write as the admin, or the admin's users read every private key.
// Only admin.token == ingress.token was refused; the previous lists bypassed it. The
// read-only token (held by a browser) is a role's token like the others. Each overlap
// is refused by the loader, naming both settings and the source each came from, and by
// node.New for a configuration built in code.
func TestNoTokenIsAcceptedForBothRoles(t *testing.T) { // not parallel: loadConfig sets os.Args
	for _, tc := range bothRolesCases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "scafo.yaml")
			yaml := "node:\n  name: vps-a\n"
			if tc.yaml != "" {
				yaml += strings.ReplaceAll(tc.yaml, "%s", shared)
			}
			if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadConfig(t, append([]string{"--configFile=" + file, "--stateDir=" + t.TempDir()}, tc.args...), tc.env)
			if err == nil {
				t.Fatal("the loader accepted a token for both roles")
			}
			for _, want := range tc.want {
				if want = strings.ReplaceAll(want, "FILE", file); !strings.Contains(err.Error(), want) {
					t.Errorf("loader: %v\ndoes not name %q", err, want)
				}
			}
			if strings.Contains(err.Error(), shared) {
				t.Errorf("loader: the refusal shows the token: %v", err)
			}

			cfg := testConfig(t, "vps-a", t.TempDir())
			cfg.Ingress, cfg.Admin = tc.ingress, tc.admin
			if tc.readOnly.Token != "" {
				cfg.Readonly = tc.readOnly
			}
			_, err = node.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("node.New accepted a token for both roles")
			}
			for _, want := range tc.wantNew {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("node.New: %v\ndoes not name %q", err, want)
				}
			}
		})
	}
}

// TestAMintedTokenInTheOtherRolesPreviousIsRefused: a token the node minted into its
// state dir (or an operator put there) is a role's token as much as a configured one:
// found in another role's previous list, or one role's token file a link to another's,
// the start is refused naming the file and the setting, before anything is served.
func TestAMintedTokenInTheOtherRolesPreviousIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minted string // the role whose token is read from its file, minted
		into   string // the role whose previous list holds it ("": its file is linked as admin's)
		want   string // F: the minted file
	}{
		{"admin", "ingress", "admin.token (the token file F) and ingress.previous[0] hold the same token"},
		{"ingress", "admin", "admin.previous[0] and ingress.token (the token file F) hold the same token"},
		{"readonly", "admin", "admin.previous[0] and readonly.token (the token file F) hold the same token"},
		{"ingress", "", "hold the same token"},
	} {
		cfg := testConfig(t, "vps-a", t.TempDir())
		roles := map[string]*node.TokenConfig{"admin": &cfg.Admin, "ingress": &cfg.Ingress, "readonly": &cfg.Readonly}
		file := filepath.Join(cfg.StateDir, tc.minted+"-token")
		tok, err := statedir.LoadOrMintToken("", cfg.StateDir, tc.minted+"-token")
		if err != nil {
			t.Fatal(err)
		}
		roles[tc.minted].Token = "" // read from its file
		if tc.into != "" {
			roles[tc.into].Previous = []string{tok}
		} else { // linked as admin's token file
			cfg.Admin.Token = ""
			if err := os.Symlink(tc.minted+"-token", filepath.Join(cfg.StateDir, "admin-token")); err != nil {
				t.Fatal(err)
			}
		}
		_, err = node.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
		if want := strings.ReplaceAll(tc.want, "F", file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the minted %s token in %q's previous: %v, want refused naming %q", tc.minted, tc.into, err, want)
		}
	}
}

// TestTheReadOnlyTokenIsMintedLikeTheOthers: with readonly.token empty the node mints
// one into <stateDir>/readonly-token (0600); one found there equal to another role's
// token is refused naming the file (TestAMintedTokenInTheOtherRolesPreviousIsRefused).
func TestTheReadOnlyTokenIsMintedLikeTheOthers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "vps-a", t.TempDir())
	cfg.Readonly.Token = ""
	srv, err := node.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // never run: its state dir stays locked, and is never used again
	file := filepath.Join(cfg.StateDir, "readonly-token")
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("readonly-token: %v %v, want a 0600 file", fi, err)
	}
	if b, err := os.ReadFile(file); err != nil || len(strings.TrimSpace(string(b))) < node.MinTokenLength {
		t.Fatalf("the minted token: %v (%d bytes)", err, len(b))
	}
}
