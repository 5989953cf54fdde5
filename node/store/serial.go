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
func BumpSerial(ctx context.Context, s Store) (uint64, error) {
	next, _, err := Update(ctx, s, SerialKey, func(cur []byte, exists bool) ([]byte, error) {
		if !exists {
			return FormatSerial(1, NewEpoch()), nil
		}
		n, epoch, err := ParseSerialEpoch(cur)
		if err != nil {
			return nil, err
		}
		return FormatSerial(n+1, epoch), nil
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
