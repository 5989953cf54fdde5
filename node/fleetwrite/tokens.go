package fleetwrite

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/scafo/ingress/node/internal/jsonx"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// ErrBadToken: the presented token is not a valid application token.
var ErrBadToken = errors.New("invalid token")

// HashToken is the stored form of an application token.
func HashToken(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// IsTokenID reports whether s is a token id: 16 lowercase hex characters.
func IsTokenID(s string) bool {
	if len(s) != 16 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// IssuedToken is a new application token; Token is shown once and never stored.
type IssuedToken struct {
	ID      string   `json:"id"`
	Token   string   `json:"token"`
	Account string   `json:"account"`
	App     string   `json:"app"`
	Roles   []string `json:"roles"`
}

// IssueToken mints an application token for app in account with roles (admin only;
// the caller checks). Only its hash is stored. Its secret carries the fleet's MAC
// (tokenmac.go), so a node refuses made-up tokens without a store read.
func (w *Writer) IssueToken(ctx context.Context, who Actor, account, app string, roles []string) (IssuedToken, error) {
	if err := routing.ValidateLabel("account", account); err != nil {
		return IssuedToken{}, invalid("invalid account", "account", err)
	}
	if err := routing.ValidateLabel("app", app); err != nil {
		return IssuedToken{}, invalid("invalid app", "app", err)
	}
	if len(roles) == 0 {
		return IssuedToken{}, invalid("invalid roles", "roles", fmt.Errorf(`roles: at least one of "publish", "instance"`))
	}
	roles = slices.Clone(roles)
	slices.Sort(roles)
	roles = slices.Compact(roles)
	for _, ro := range roles {
		if ro != fleet.RolePublish && ro != fleet.RoleInstance {
			return IssuedToken{}, invalid("invalid roles", "roles", fmt.Errorf("role %q: want publish or instance", ro))
		}
	}
	a, _, err := w.App(ctx, app)
	if err != nil {
		return IssuedToken{}, err
	}
	if a.Account != account {
		return IssuedToken{}, invalid("invalid account", "account", fmt.Errorf("application %s belongs to account %q, not %q", a.Name, a.Account, account))
	}
	if a.ControlPlane {
		return IssuedToken{}, &ErrForbidden{What: "control plane", Detail: "application tokens are refused on the control-plane application"}
	}
	mac, err := w.issueKey(ctx)
	if err != nil {
		return IssuedToken{}, err
	}
	idb := make([]byte, 8)
	rand.Read(idb)
	id := hex.EncodeToString(idb)
	random := randomHexN(macRandomHex / 2)
	tok := "scafo_" + id + "_" + random + mac.sum(id, random) // the secret carries a MAC (tokenmac.go)
	rec := fleet.TokenRecord{ID: id, Account: account, App: app, AppID: a.ID, Roles: roles, SHA256: HashToken(tok)}
	b, _ := jsonx.Marshal(rec)
	if _, err := w.st.Put(ctx, fleet.TokenKey(id), b, store.Condition{IfNoneMatch: true}); err != nil {
		return IssuedToken{}, fmt.Errorf("storing token: %w", err)
	}
	if err := w.committed(ctx, who, AuditRecord{Action: "token.create", Account: account, App: app, Token: id}, fleet.TokenKey(id)); err != nil {
		// Never shown, so never usable: withdraw it, so a retry does not leave one more.
		w.st.Delete(context.WithoutCancel(ctx), fleet.TokenKey(id), "")
		return IssuedToken{}, err
	}
	return IssuedToken{ID: id, Token: tok, Account: account, App: app, Roles: roles}, nil
}

// RevokeToken deletes the application token id (admin only; the caller checks).
func (w *Writer) RevokeToken(ctx context.Context, who Actor, id string) error {
	if !IsTokenID(id) {
		return invalid("invalid id", "id", fmt.Errorf("id %q: want 16 hex characters", id))
	}
	obj, err := w.st.Get(ctx, fleet.TokenKey(id))
	if errors.Is(err, store.ErrNotFound) {
		if serr := w.settle(ctx); serr != nil {
			return serr // a retry of a revoke whose announcement failed: announce it
		}
	}
	if err != nil {
		return fmt.Errorf("reading token %s: %w", id, err)
	}
	var rec fleet.TokenRecord
	json.Unmarshal(obj.Value, &rec) // a malformed record is still revoked
	if err := w.st.Delete(ctx, fleet.TokenKey(id), obj.ETag); err != nil {
		return fmt.Errorf("revoking token %s: %w", id, err)
	}
	return w.committed(ctx, who, AuditRecord{Action: "token.revoke", Account: rec.Account, App: rec.App, Token: id}, fleet.TokenKey(id))
}

// LookupToken finds the record of a presented application token
// ("scafo_<id>_<secret>"), read from the store on every call so a revocation takes
// effect at once. Any mismatch is ErrBadToken; a store failure is returned as it is.
func (w *Writer) LookupToken(ctx context.Context, tok string) (fleet.TokenRecord, error) {
	rest, ok := strings.CutPrefix(tok, "scafo_")
	if !ok {
		return fleet.TokenRecord{}, ErrBadToken
	}
	id, _, ok := strings.Cut(rest, "_")
	if !ok || !IsTokenID(id) {
		return fleet.TokenRecord{}, ErrBadToken
	}
	obj, err := w.st.Get(ctx, fleet.TokenKey(id))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fleet.TokenRecord{}, ErrBadToken
		}
		return fleet.TokenRecord{}, err
	}
	var rec fleet.TokenRecord
	if err := json.Unmarshal(obj.Value, &rec); err != nil {
		return fleet.TokenRecord{}, ErrBadToken
	}
	if subtle.ConstantTimeCompare([]byte(HashToken(tok)), []byte(rec.SHA256)) != 1 {
		return fleet.TokenRecord{}, ErrBadToken
	}
	return rec, nil
}
