package certstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A value is stored in an envelope: a magic line, one JSON header line, then the value's
// bytes unchanged.
//
//	scafo-certstore/1
//	{"key":"certificates/…/a.crt","modified":"2026-…Z","size":1234,"sha256":"…"}
//	<value>
//
// The header makes Stat one read (the store's Get carries no time), lets List name a
// key whose long segments were hashed (see escapeSegment), and lets a read detect a
// value that is not what was written (a truncated or edited object is an error, never
// served as a certificate).
const magic = "scafo-certstore/1\n"

// maxHeader bounds the header line: a MaxKeyLen key escaped by JSON (\u00XX, 6 bytes a
// byte) plus the other fields.
const maxHeader = 6*MaxKeyLen + 256

// ErrCorrupt: a stored object in the namespace that is not a valid envelope, or whose
// value does not match its header.
var ErrCorrupt = errors.New("certstore: corrupt object")

type header struct {
	Key      string    `json:"key"`
	Modified time.Time `json:"modified"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256"`
}

func seal(key string, value []byte, now time.Time) []byte {
	sum := sha256.Sum256(value)
	h, _ := json.Marshal(header{Key: key, Modified: now.UTC(), Size: int64(len(value)), SHA256: hex.EncodeToString(sum[:])})
	out := make([]byte, 0, len(magic)+len(h)+1+len(value))
	out = append(out, magic...)
	out = append(out, h...)
	out = append(out, '\n')
	return append(out, value...)
}

// open checks an envelope and returns its header and value (a sub-slice of b).
func open(b []byte) (header, []byte, error) {
	rest, ok := bytes.CutPrefix(b, []byte(magic))
	if !ok {
		return header{}, nil, fmt.Errorf("%w: no %q magic line", ErrCorrupt, magic[:len(magic)-1])
	}
	i := bytes.IndexByte(rest, '\n')
	if i < 0 || i > maxHeader {
		return header{}, nil, fmt.Errorf("%w: header line missing or longer than %d bytes", ErrCorrupt, maxHeader)
	}
	var h header
	if err := json.Unmarshal(rest[:i], &h); err != nil {
		return header{}, nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	value := rest[i+1:]
	if h.Size != int64(len(value)) {
		return header{}, nil, fmt.Errorf("%w: header says %d bytes, object holds %d", ErrCorrupt, h.Size, len(value))
	}
	sum := sha256.Sum256(value)
	if h.SHA256 != hex.EncodeToString(sum[:]) {
		return header{}, nil, fmt.Errorf("%w: value does not match its sha256", ErrCorrupt)
	}
	if h.Key == "" {
		return header{}, nil, fmt.Errorf("%w: header names no key", ErrCorrupt)
	}
	return h, value, nil
}
