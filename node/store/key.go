package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidKey: a key or list prefix that no backend accepts. Backends wrap it with the
// offending key; test with errors.Is.
var ErrInvalidKey = errors.New("store: invalid key")

// MaxKeyLen bounds a key in bytes (S3 allows 1024 including any bucket prefix).
const MaxKeyLen = 512

// CheckKey reports whether key is a valid object key: slash-separated, relative, with no
// empty, "." or ".." segments, no backslashes or control characters, and no segment
// starting with "." (hidden names are reserved for backends: temp files, lock files).
// Both backends enforce it, so a key valid on one is valid on the other.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key %.40q… longer than %d bytes", ErrInvalidKey, key, MaxKeyLen)
	}
	if err := checkChars(key); err != nil {
		return fmt.Errorf("%w: key %q: %s", ErrInvalidKey, key, err)
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("%w: key %q is absolute", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if msg := checkSegment(seg); msg != "" {
			return fmt.Errorf("%w: key %q: %s", ErrInvalidKey, key, msg)
		}
	}
	return nil
}

// CheckPrefix reports whether prefix is a valid List prefix: empty (everything), or a
// key prefix such as "apps/" or "apps/sh" whose complete segments obey CheckKey's rules.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxKeyLen {
		return fmt.Errorf("%w: prefix %.40q… longer than %d bytes", ErrInvalidKey, prefix, MaxKeyLen)
	}
	if err := checkChars(prefix); err != nil {
		return fmt.Errorf("%w: prefix %q: %s", ErrInvalidKey, prefix, err)
	}
	if strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("%w: prefix %q is absolute", ErrInvalidKey, prefix)
	}
	segs := strings.Split(prefix, "/")
	// The last segment is partial ("apps/sh") or empty ("apps/"); only complete
	// segments are checked, but a partial ".." or "." start is still refused.
	for i, seg := range segs {
		last := i == len(segs)-1
		if last {
			if strings.HasPrefix(seg, ".") {
				return fmt.Errorf("%w: prefix %q: segment %q starts with a dot", ErrInvalidKey, prefix, seg)
			}
			continue
		}
		if msg := checkSegment(seg); msg != "" {
			return fmt.Errorf("%w: prefix %q: %s", ErrInvalidKey, prefix, msg)
		}
	}
	return nil
}

func checkChars(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case r == '\\':
			return errors.New("contains a backslash")
		case r < 0x20 || r == 0x7f:
			return errors.New("contains a control character")
		}
	}
	return nil
}

func checkSegment(seg string) string {
	switch {
	case seg == "":
		return "empty path segment"
	case seg == "." || seg == "..":
		return fmt.Sprintf("segment %q is not allowed", seg)
	case strings.HasPrefix(seg, "."):
		return fmt.Sprintf("segment %q starts with a dot (reserved)", seg)
	}
	return ""
}
