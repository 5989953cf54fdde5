package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/store"
)

// TestCheckKeyAndPrefix: a key or a list prefix is valid, or refused with an
// ErrInvalidKey naming the rule it breaks.
func TestCheckKeyAndPrefix(t *testing.T) {
	tests := []struct {
		prefix  bool // CheckPrefix, not CheckKey
		s       string
		wantErr string // "" = valid
	}{
		{false, "serial", ""},
		{false, "apps/shop.json", ""},
		{false, "domains/exämple.test.json", ""},
		{false, "a/b/c/d.json", ""},
		{false, "", "empty key"},
		{false, "/apps/x.json", "absolute"},
		{false, "apps//x.json", "empty path segment"},
		{false, "apps/", "empty path segment"},
		{false, "../x", `segment ".."`},
		{false, "apps/../x", `segment ".."`},
		{false, "apps/./x", `segment "."`},
		{false, `apps\x.json`, "backslash"},
		{false, ".lock", "starts with a dot"},
		{false, "apps/.tmp-123", "starts with a dot"},
		{false, "apps/x\x00y", "control character"},
		{false, "apps/\xff.json", "UTF-8"},
		{false, strings.Repeat("a", store.MaxKeyLen+1), "longer than"},
		{true, "", ""},
		{true, "apps/", ""},
		{true, "apps/sh", ""},
		{true, "ser", ""},
		{true, "a/b/", ""},
		{true, "/apps/", "absolute"},
		{true, "apps//", "empty path segment"},
		{true, "../", `segment ".."`},
		{true, "..", "starts with a dot"},
		{true, ".tmp", "starts with a dot"},
		{true, `a\`, "backslash"},
	}
	for _, tc := range tests {
		check, name := store.CheckKey, "CheckKey"
		if tc.prefix {
			check, name = store.CheckPrefix, "CheckPrefix"
		}
		err := check(tc.s)
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s(%.40q) = %v, want nil", name, tc.s, err)
		} else if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, store.ErrInvalidKey)) {
			t.Errorf("%s(%.40q) = %v, want ErrInvalidKey mentioning %q", name, tc.s, err, tc.wantErr)
		}
	}
}
