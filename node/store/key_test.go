package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/scafo/ingress/node/store"
)

func TestCheckKey(t *testing.T) {
	tests := []struct {
		key     string
		wantErr string // "" = valid
	}{
		{"serial", ""},
		{"apps/shop.json", ""},
		{"domains/exämple.test.json", ""},
		{"a/b/c/d.json", ""},
		{"", "empty key"},
		{"/apps/x.json", "absolute"},
		{"apps//x.json", "empty path segment"},
		{"apps/", "empty path segment"},
		{"../x", `segment ".."`},
		{"apps/../x", `segment ".."`},
		{"apps/./x", `segment "."`},
		{`apps\x.json`, "backslash"},
		{".lock", "starts with a dot"},
		{"apps/.tmp-123", "starts with a dot"},
		{"apps/x\x00y", "control character"},
		{"apps/\xff.json", "UTF-8"},
		{strings.Repeat("a", store.MaxKeyLen+1), "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			err := store.CheckKey(tc.key)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckKey(%q) = %v, want nil", tc.key, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, store.ErrInvalidKey) {
				t.Fatalf("CheckKey(%q) = %v, want ErrInvalidKey mentioning %q", tc.key, err, tc.wantErr)
			}
		})
	}
}

func TestCheckPrefix(t *testing.T) {
	tests := []struct {
		prefix  string
		wantErr string
	}{
		{"", ""},
		{"apps/", ""},
		{"apps/sh", ""},
		{"ser", ""},
		{"a/b/", ""},
		{"/apps/", "absolute"},
		{"apps//", "empty path segment"},
		{"../", `segment ".."`},
		{"..", "starts with a dot"},
		{".tmp", "starts with a dot"},
		{`a\`, "backslash"},
	}
	for _, tc := range tests {
		t.Run(tc.prefix, func(t *testing.T) {
			err := store.CheckPrefix(tc.prefix)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckPrefix(%q) = %v, want nil", tc.prefix, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, store.ErrInvalidKey) {
				t.Fatalf("CheckPrefix(%q) = %v, want ErrInvalidKey mentioning %q", tc.prefix, err, tc.wantErr)
			}
		})
	}
}
