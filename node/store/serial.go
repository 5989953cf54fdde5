package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// SerialKey is the object every write that changed something bumps. Its value is a
// decimal counter followed by the store's epoch ("42 3f9a0c1e5b7d2a64"); a missing
// object reads as 0.
//
// The epoch is minted when the serial is created and never changes after: it names one
// store. A node that saw epoch E and later finds another epoch (or a serial that went
// backwards) is looking at a wiped, replaced or restored store, not at the fleet it
// served, and must not publish what it finds there. A bare counter ("42", written
// before epochs existed) has the empty epoch.
const SerialKey = "serial"

// ParseSerial decodes the counter of the serial object; see ParseSerialEpoch.
func ParseSerial(value []byte) (uint64, error) {
	n, _, err := ParseSerialEpoch(value)
	return n, err
}

// ParseSerialEpoch decodes the serial object: a decimal uint64 and an optional epoch of
// 16 lowercase hex characters, separated by one space, surrounding whitespace allowed.
func ParseSerialEpoch(value []byte) (n uint64, epoch string, err error) {
	s := strings.TrimSpace(string(value))
	num, epoch, _ := strings.Cut(s, " ")
	n, err = strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("parsing %q object %.40q: want a decimal counter and an epoch: %w", SerialKey, s, err)
	}
	if epoch != "" && !isEpoch(epoch) {
		return 0, "", fmt.Errorf("parsing %q object %.40q: epoch %q: want 16 lowercase hex characters", SerialKey, s, epoch)
	}
	return n, epoch, nil
}

func isEpoch(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// FormatSerial encodes a serial object's value.
func FormatSerial(n uint64, epoch string) []byte {
	b := strconv.AppendUint(nil, n, 10)
	if epoch != "" {
		b = append(b, ' ')
		b = append(b, epoch...)
	}
	return b
}

// MaxSerialNames bounds the keys a serial bump names; a bump that changed more names
// none, and readers fall back to a full read.
const MaxSerialNames = 64

// FormatSerialNames encodes a serial object that names the keys the bump's write
// changed: the first line is FormatSerial's, each following line one key.
//
// Compatibility: nodes built before names existed parse the serial with
// ParseSerialEpoch as it was, which trims surrounding whitespace and refuses anything
// else after the epoch. So the names are written in whitespace only (each byte of a key
// as four base-4 digits, ' ' '\t' '\v' '\f', one key per '\n'-led line): an old node
// reads "N epoch" and ignores them; when it bumps, it writes "N+1 epoch" without
// names, which a new node reads as a bump without names (a full read).
func FormatSerialNames(n uint64, epoch string, names []string) []byte {
	b := FormatSerial(n, epoch)
	if len(names) == 0 || len(names) > MaxSerialNames {
		return b
	}
	for _, k := range names {
		b = append(b, '\n')
		for i := 0; i < len(k); i++ {
			c := k[i]
			for shift := 6; shift >= 0; shift -= 2 {
				b = append(b, wsDigits[(c>>shift)&3])
			}
		}
	}
	return b
}

const wsDigits = " \t\v\f"

// ParseSerialNames decodes a serial object with the keys its bump named. names is nil
// when the bump named none (an old node's bump, a bare or epoch-only serial, too many
// keys), the trailer does not decode, or it names more than MaxSerialNames (no bump
// writes that: a hand-edited serial must not make every node read what it lists): the
// reader must then read everything.
func ParseSerialNames(value []byte) (n uint64, epoch string, names []string, err error) {
	n, epoch, err = ParseSerialEpoch(value)
	if err != nil {
		return 0, "", nil, err
	}
	s := string(value)
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return n, epoch, nil, nil
	}
	lines := strings.Split(s[i+1:], "\n")
	if len(lines) > MaxSerialNames {
		return n, epoch, nil, nil
	}
	for _, line := range lines {
		if line == "" || len(line)%4 != 0 {
			return n, epoch, nil, nil
		}
		k := make([]byte, 0, len(line)/4)
		for j := 0; j < len(line); j += 4 {
			var c byte
			for _, d := range []byte(line[j : j+4]) {
				v := strings.IndexByte(wsDigits, d)
				if v < 0 {
					return n, epoch, nil, nil
				}
				c = c<<2 | byte(v)
			}
			k = append(k, c)
		}
		if CheckKey(string(k)) != nil {
			return n, epoch, nil, nil
		}
		names = append(names, string(k))
	}
	return n, epoch, names, nil
}

// NewEpoch mints a store epoch.
func NewEpoch() string {
	return fmt.Sprintf("%016x", rand.Uint64())
}

// ReadSerial returns the current serial and the etag of its object. A store that has no
// serial yet reads as 0 with an empty etag.
func ReadSerial(ctx context.Context, s Store) (serial uint64, etag string, err error) {
	obj, err := s.Get(ctx, SerialKey)
	if errors.Is(err, ErrNotFound) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("reading serial: %w", err)
	}
	n, err := ParseSerial(obj.Value)
	if err != nil {
		return 0, "", err
	}
	return n, obj.ETag, nil
}

// BumpSerial increments the serial by one with a compare-and-swap loop (create-only for
// the first bump, which mints the epoch; later bumps keep it) and returns the new value. Concurrent bumps from any number of
// writers each get a distinct value; none is lost. It retries on conflict with a short
// jittered backoff until it wins or ctx ends. A serial object that does not parse is an
// error, never silently reset.
//
// names are the keys the write being announced changed (see FormatSerialNames); none
// makes readers read everything.
func BumpSerial(ctx context.Context, s Store, names ...string) (uint64, error) {
	next, _, err := Update(ctx, s, SerialKey, func(cur []byte, exists bool) ([]byte, error) {
		if !exists {
			return FormatSerialNames(1, NewEpoch(), names), nil
		}
		n, epoch, err := ParseSerialEpoch(cur)
		if err != nil {
			return nil, err
		}
		// Computed from this attempt's value: a bump that lost to another one names
		// only its own keys on the serial after that one.
		next, err := nextSerial(n)
		if err != nil {
			return nil, err
		}
		return FormatSerialNames(next, epoch, names), nil
	})
	if err != nil {
		return 0, fmt.Errorf("bumping serial: %w", err)
	}
	return ParseSerial(next)
}

// Update applies fn to the current value of key and writes the result conditionally
// (If-Match the etag read, or create-only when absent), retrying with jittered backoff
// when another writer wins, until it succeeds or ctx ends. fn must be a pure function of
// its input: it may run several times. Update returns the value it wrote and its etag.
func Update(ctx context.Context, s Store, key string, fn func(cur []byte, exists bool) ([]byte, error)) (value []byte, etag string, err error) {
	for attempt := 0; ; attempt++ {
		var cond Condition
		obj, err := s.Get(ctx, key)
		exists := err == nil
		switch {
		case exists:
			cond.IfMatch = obj.ETag
		case errors.Is(err, ErrNotFound):
			cond.IfNoneMatch = true
		default:
			return nil, "", fmt.Errorf("updating %q: %w", key, err)
		}
		next, err := fn(obj.Value, exists)
		if err != nil {
			return nil, "", fmt.Errorf("updating %q: %w", key, err)
		}
		etag, err := s.Put(ctx, key, next, cond)
		if err == nil {
			return next, etag, nil
		}
		if !errors.Is(err, ErrPreconditionFailed) {
			return nil, "", fmt.Errorf("updating %q: %w", key, err)
		}
		if err := Backoff(ctx, attempt); err != nil {
			return nil, "", fmt.Errorf("updating %q after %d conflicts: %w", key, attempt+1, err)
		}
	}
}

// Backoff waits before retry number attempt (0-based) of a conditional write that lost:
// a random delay up to 1ms×2^attempt, capped at 50ms, or until ctx ends (returning its
// error). The jitter spreads writers that lost together so they do not collide again.
func Backoff(ctx context.Context, attempt int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	limit := 50 * time.Millisecond
	if attempt < 6 {
		limit = min(limit, time.Millisecond<<attempt)
	}
	t := time.NewTimer(rand.N(limit) + time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
