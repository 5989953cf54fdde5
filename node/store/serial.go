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
// decimal counter ("42"); a missing object reads as 0.
const SerialKey = "serial"

// ParseSerial decodes the value of the serial object: a decimal uint64, surrounding
// whitespace allowed.
func ParseSerial(value []byte) (uint64, error) {
	s := strings.TrimSpace(string(value))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing %q object %.32q: want a decimal counter: %w", SerialKey, s, err)
	}
	return n, nil
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
// the first bump) and returns the new value. Concurrent bumps from any number of
// writers each get a distinct value; none is lost. It retries on conflict with a short
// jittered backoff until it wins or ctx ends. A serial object that does not parse is an
// error, never silently reset.
func BumpSerial(ctx context.Context, s Store) (uint64, error) {
	next, _, err := Update(ctx, s, SerialKey, func(cur []byte, exists bool) ([]byte, error) {
		var n uint64
		if exists {
			var err error
			if n, err = ParseSerial(cur); err != nil {
				return nil, err
			}
		}
		return strconv.AppendUint(nil, n+1, 10), nil
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
