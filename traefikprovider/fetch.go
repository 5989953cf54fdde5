package traefikprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxBody caps a configuration body. A fleet's rendered configuration is a few MiB
// at most; anything larger is a fault, not a configuration.
const maxBody = 64 << 20

// fetchResult is the outcome of one request to one endpoint.
type fetchResult struct {
	// changed is true when a 200 carried a configuration other than the last one.
	changed bool
	// key identifies the configuration: the node's ETag, or, if the node sent
	// none, a hash of the body ("sha256:…").
	key string
	// etag is true when key is a node ETag, so If-None-Match (and long-polling)
	// can be used with it.
	etag bool
	// body is the configuration to emit when changed.
	body []byte
	// hasSerial is true when the answer (200 or 304) carried X-Scafo-Serial: the store
	// serial the node's configuration was derived from, in epoch (X-Scafo-Epoch, ""
	// when absent). A node without the header predates it (a legacy node).
	hasSerial bool
	serial    uint64
	epoch     string
	// revision is the document revision of a 200 (X-Scafo-Revision).
	revision string
}

// Headers of a node's answer naming the store state it was derived from.
const (
	headerSerial = "X-Scafo-Serial"
	headerEpoch  = "X-Scafo-Epoch"
)

// readSerial reads an answer's X-Scafo-Serial and X-Scafo-Epoch; a missing or
// malformed serial gives ok false (the answer is then taken as a legacy node's).
// Returned, not stored through a pointer, and assigned field by field by the caller:
// plain constructs for Yaegi.
func readSerial(h http.Header) (serial uint64, epoch string, ok bool) {
	v := strings.TrimSpace(h.Get(headerSerial))
	if v == "" {
		return 0, "", false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, "", false
	}
	return n, strings.TrimSpace(h.Get(headerEpoch)), true
}

// fetch asks one endpoint for the configuration. last is the key of the last emitted
// configuration ("" for none) and lastETag whether it is a node ETag. With longPoll,
// the node may hold the request for wait until the revision moves. behind, when
// not empty, is the ETag of an older configuration this endpoint was seen serving and
// that was not applied: it is sent in If-None-Match beside last, so the node holds the
// long-poll until its revision moves past both.
//
// Every request reports this ingress to the node (X-Scafo-Ingress, the name; the kind;
// and, once one was applied, the serial, epoch and revision of what it applied).
func (p *Provider) fetch(ctx context.Context, endpoint, last string, lastETag, longPoll bool, behind string, wait time.Duration, applied appliedState) (fetchResult, error) {
	var res fetchResult

	target := endpoint
	timeout := p.s.pollTimeout
	if longPoll && lastETag && last != "" {
		u, err := url.Parse(endpoint)
		if err != nil {
			return res, fmt.Errorf("parsing endpoint URL: %w", err)
		}
		q := u.Query()
		q.Set("wait", wait.String())
		u.RawQuery = q.Encode()
		target = u.String()
		timeout += wait
	}

	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, target, nil)
	if err != nil {
		return res, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+p.s.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "scafo-traefikprovider")
	req.Header.Set("X-Scafo-Ingress", p.s.name)
	req.Header.Set("X-Scafo-Ingress-Kind", "plugin")
	if applied.ok {
		req.Header.Set("X-Scafo-Applied-Serial", strconv.FormatUint(applied.serial, 10))
		if applied.epoch != "" {
			req.Header.Set("X-Scafo-Applied-Epoch", applied.epoch)
		}
		if applied.revision != "" {
			req.Header.Set("X-Scafo-Applied-Revision", applied.revision)
		}
	}
	if lastETag && last != "" {
		inm := last
		if behind != "" && behind != last {
			inm += ", " + behind
		}
		req.Header.Set("If-None-Match", inm)
	}

	resp, err := p.client.Do(req)
	if err != nil {
		return res, requestError(ctx, reqCtx, timeout, err)
	}
	defer resp.Body.Close()
	serial, epoch, ok := readSerial(resp.Header)
	res.serial = serial
	res.epoch = epoch
	res.hasSerial = ok

	switch resp.StatusCode {
	case http.StatusOK:
		// handled below
	case http.StatusNotModified:
		if !lastETag || last == "" {
			return res, errors.New("304 Not Modified to a request without If-None-Match")
		}
		res.key, res.etag = last, true
		return res, nil
	case http.StatusServiceUnavailable:
		msg := "503 " + errorText(resp.Body)
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			msg += " (Retry-After " + ra + ")"
		}
		return res, errors.New(msg)
	case http.StatusUnauthorized, http.StatusForbidden:
		return res, fmt.Errorf("%d: ingress token rejected: %s", resp.StatusCode, errorText(resp.Body))
	default:
		return res, fmt.Errorf("unexpected status %d: %s", resp.StatusCode, errorText(resp.Body))
	}

	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return res, fmt.Errorf("reading body: %w", requestError(ctx, reqCtx, timeout, err))
	}
	if len(body) > maxBody {
		return res, fmt.Errorf("body larger than %d bytes", maxBody)
	}

	res.revision = resp.Header.Get("X-Scafo-Revision")
	if etag := resp.Header.Get("ETag"); etag != "" {
		res.key, res.etag = etag, true
	} else {
		sum := sha256.Sum256(body)
		res.key = "sha256:" + hex.EncodeToString(sum[:])
	}
	if res.key == last {
		return res, nil
	}

	checked, err := checkConfiguration(body)
	if err != nil {
		return res, fmt.Errorf("configuration %s rejected: %w", res.key, err)
	}
	res.changed = true
	res.body = checked
	return res, nil
}

// requestError says why a request failed, in the operator's terms.
func requestError(ctx, reqCtx context.Context, timeout time.Duration, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no complete answer within %s", timeout)
	}
	return err
}

// errorText extracts a node's error message ({"error": "...", "detail": "..."}) or a
// short prefix of whatever the body is.
func errorText(r io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(r, 512))
	var e struct {
		Error  string `json:"error"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		if e.Detail != "" {
			return e.Error + ": " + e.Detail
		}
		return e.Error
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "(no body)"
	}
	return fmt.Sprintf("%q", s)
}
