package certstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/scafo/ingress/node/store"
)

// Namespaces in the fleet store. Nothing outside them is ever read or written.
const (
	// DataPrefix holds the values: a CertMagic key k is the store key DataPrefix +
	// storeKey(k).
	DataPrefix = "certs/"
	// LockPrefix holds the locks: lock name n is the store key LockPrefix +
	// escapeSegment(n) + fileMark.
	LockPrefix = "certlocks/"
)

// Limits on keys and lock names.
const (
	// MaxKeyLen bounds a CertMagic key or lock name in bytes, before mapping.
	MaxKeyLen = 1024
	// maxPlainSegment is the longest escaped segment stored as it is; a longer one is
	// shortened to a prefix and a hash (MinIO refuses segments over 255 bytes, and file
	// names stop at 255 bytes).
	maxPlainSegment = 200
	// hashedPrefixLen is how much of a long escaped segment is kept, for readability.
	hashedPrefixLen = 96
)

// Marks in mapped segments. Escaping never produces them ('~' and '!' are escaped in
// keys), so they cannot be confused with key content.
const (
	// hashMark separates a long segment's kept prefix from its hash.
	hashMark = '~'
	// fileMark ends the last segment of a value's store key, so a value "a" and the
	// values below "a/" are different store keys on every backend (a directory store
	// cannot hold a file "a" and a directory "a").
	fileMark = "!"
)

// ErrInvalidKey: a key, prefix or lock name that the namespace refuses. The message says
// which rule it broke.
var ErrInvalidKey = errors.New("certstore: invalid key")

// CheckKey reports whether key is a valid CertMagic key here: non-empty, valid UTF-8, at
// most MaxKeyLen bytes, slash-separated with no leading or trailing slash, no empty, "."
// or ".." segment, no backslash, no control character (NUL included), and short enough
// once mapped to fit the store's key limit. Every other character ('*', '@', ':', '%',
// spaces, non-ASCII letters…) is allowed and round-trips.
func CheckKey(key string) error {
	_, err := dataKey(key, true)
	return err
}

// CheckLockName reports whether name is a valid lock name: non-empty, valid UTF-8, at
// most MaxKeyLen bytes, no control character or backslash. Slashes are allowed (a lock
// name is one opaque segment).
func CheckLockName(name string) error {
	_, err := lockKey(name)
	return err
}

func checkCommon(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, what)
	}
	if len(s) > MaxKeyLen {
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalidKey, what, len(s), MaxKeyLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidKey, what, s)
	}
	for _, r := range s {
		switch {
		case r == '\\':
			return fmt.Errorf("%w: %s %q contains a backslash", ErrInvalidKey, what, s)
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("%w: %s %q contains a control character", ErrInvalidKey, what, s)
		}
	}
	return nil
}

// checkPath applies the path rules (segments) to a key or prefix.
func checkPath(what, s string) error {
	if err := checkCommon(what, s); err != nil {
		return err
	}
	if strings.HasPrefix(s, "/") {
		return fmt.Errorf("%w: %s %q is absolute (leading slash)", ErrInvalidKey, what, s)
	}
	if strings.HasSuffix(s, "/") {
		return fmt.Errorf("%w: %s %q has a trailing slash", ErrInvalidKey, what, s)
	}
	for seg := range strings.SplitSeq(s, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %s %q has an empty segment", ErrInvalidKey, what, s)
		case ".", "..":
			return fmt.Errorf("%w: %s %q has a %q segment", ErrInvalidKey, what, s, seg)
		}
	}
	return nil
}

// dataKey maps a CertMagic key to its store key: the value's key when file is true, the
// directory prefix (ending in "/") when false.
func dataKey(key string, file bool) (string, error) {
	if err := checkPath("key", key); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(DataPrefix)
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(escapeSegment(seg))
	}
	if file {
		b.WriteString(fileMark)
	} else {
		b.WriteByte('/')
	}
	out := b.String()
	// The file form ("!") and the directory form ("/") have one length, so a key that
	// can be stored can also be listed as a directory.
	if n := len(out); n > store.MaxKeyLen {
		return "", fmt.Errorf("%w: key %.60q… maps to a %d-byte store key, over the store's %d (shorten the key or its segments)", ErrInvalidKey, key, n, store.MaxKeyLen)
	}
	return out, nil
}

// dirPrefix is the store prefix under which the keys below prefix live: DataPrefix for
// the root (""), dataKey(prefix, false) otherwise.
func dirPrefix(prefix string) (string, error) {
	if prefix == "" {
		return DataPrefix, nil
	}
	return dataKey(prefix, false)
}

func lockKey(name string) (string, error) {
	if err := checkCommon("lock name", name); err != nil {
		return "", err
	}
	return LockPrefix + escapeSegment(name) + fileMark, nil
}

// escapeSegment maps one key segment to a store segment injectively: ASCII letters,
// digits, '-', '_', '@' and (except in first place) '.' stay; every other byte is %XX
// (uppercase hex). An escaped segment longer than maxPlainSegment becomes its first
// hashedPrefixLen bytes (never cutting an escape), '~', and the hex SHA-256 of the raw
// segment (128 bits, 32 hex digits): such a segment is not reversible from the store key
// alone, so every value records its own key (see the envelope).
func escapeSegment(seg string) string {
	var b strings.Builder
	b.Grow(len(seg))
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if plainByte(c) || (c == '.' && i > 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	out := b.String()
	if len(out) <= maxPlainSegment {
		return out
	}
	cut := hashedPrefixLen
	// Do not cut inside "%XX".
	if i := strings.LastIndexByte(out[:cut], '%'); i >= 0 && i > cut-3 {
		cut = i
	}
	sum := sha256.Sum256([]byte(seg))
	return out[:cut] + string(hashMark) + hex.EncodeToString(sum[:16])
}

func plainByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '@'
}

// unescapeSegment reverses escapeSegment. hashed is true (and seg "") for a shortened
// segment, whose original only the objects below it know. ok is false for a segment
// escapeSegment never produces (a foreign object in the namespace).
func unescapeSegment(s string) (seg string, hashed, ok bool) {
	if strings.IndexByte(s, hashMark) >= 0 {
		return "", true, isHashed(s)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) {
				return "", false, false
			}
			v, err := hex.DecodeString(s[i+1 : i+3])
			if err != nil || s[i+1:i+3] != strings.ToUpper(s[i+1:i+3]) {
				return "", false, false
			}
			b.WriteByte(v[0])
			i += 2
		case plainByte(c) || (c == '.' && i > 0):
			b.WriteByte(c)
		default:
			return "", false, false
		}
	}
	seg = b.String()
	// Only the canonical spelling is accepted, so one segment has one store spelling.
	if seg == "" || escapeSegment(seg) != s {
		return "", false, false
	}
	return seg, false, true
}

func isHashed(s string) bool {
	i := strings.IndexByte(s, hashMark)
	if i < 0 || len(s)-i-1 != 32 {
		return false
	}
	_, err := hex.DecodeString(s[i+1:])
	return err == nil && strings.IndexByte(s[i+1:], hashMark) < 0
}
