package httpapi_test

// Request bodies are decoded strictly, in time linear in their size, and nothing may
// follow the JSON value (regressions of the second hostile-tenant review: each failed
// before its fix).

import (
	"strings"
	"testing"
	"time"
)

// TestStrictDecodeIsLinearInALongMapKey: jsonx.checkKeys builds the
// error-report path of every array element (fmt.Sprintf("%s[%d]", path, i)) and of every
// key (path + "." + k) eagerly, whatever the type. Under a map key of K bytes, an array
// of N elements costs K*N bytes of copying before anything is refused: a 2 MiB body
// (K = 1 MiB, N = 512k) costs minutes of CPU and ~0.5 TB of allocation. Any application
// token reaches it: the path-map door decodes the body before it authorizes the caller,
// and writes.burst (20) such requests can be in flight at once.
// Expected: a ~190 KiB body is refused in about the time of a same-sized control body
// (tens of ms). Actual: 20-100x that (1-6 s on the 2-core review machine).
func TestStrictDecodeIsLinearInALongMapKey(t *testing.T) {
	n, _ := countingTokens(t)
	_, tok := n.IssueToken("evil", "evil", `"publish"`)

	// Control: the same bytes with a short key cost nothing.
	ctl := `{"paths":{"k":[` + strings.Repeat("0,", 80_000) + `0]}}`
	start := time.Now()
	resp, _ := n.Do("PUT", "/v1/apps/evil/domains/x.evil.example/paths", tok, ctl)
	ctlTime := time.Since(start)

	key := strings.Repeat("a", 32<<10)
	body := `{"paths":{"` + key + `":[` + strings.Repeat("0,", 80_000) + `0]}}`
	start = time.Now()
	resp, _ = n.Do("PUT", "/v1/apps/evil/domains/x.evil.example/paths", tok, body)
	took := time.Since(start)
	t.Logf("control %d bytes: %v; long key %d bytes: %v (status %d)", len(ctl), ctlTime, len(body), took, resp.StatusCode)
	if took > 500*time.Millisecond && took > 8*ctlTime {
		t.Fatalf("a %d-byte body took %v to refuse (control of %d bytes: %v): checkKeys is O(key length x elements)",
			len(body), took, len(ctl), ctlTime)
	}
}

// TestATrailingCloserAfterTheBodyIsRefused: DecodeStrict promises "one value
// only", and checks it with dec.More(), which is false before '}' and ']'. So
// `{"paths":{}}]{"paths":{…}}` (or any tail starting with '}' or ']') is accepted as a
// clear of every flip: the rest of the body is silently ignored.
// Expected: 400 trailing data. Actual: 200, the map cleared.
// Fix: jsonx.DecodeStrict: after Decode, require only whitespace to remain
// (io.ReadAll(dec.Buffered()) plus the unread rest, trimmed, empty).
func TestATrailingCloserAfterTheBodyIsRefused(t *testing.T) {
	n, _ := newInProcess(t, nil), 0
	n.Must(201, "PUT", "/v1/apps/shop", ipAdmin, `{"account":"acme","placement":["vps-a"]}`)
	n.Must(201, "PUT", "/v1/apps/shop/domains/shop.example", ipAdmin, "")
	n.Must(200, "PUT", "/v1/apps/shop/domains/shop.example/paths", ipAdmin, `{"paths":{"a":"shop.example"}}`)
	resp, b := n.Do("PUT", "/v1/apps/shop/domains/shop.example/paths", ipAdmin, `{"paths":{}}]{"paths":{"a":"shop.example"}}`)
	if resp.StatusCode != 400 {
		t.Fatalf("a body with trailing data after the object: %d %s, want 400", resp.StatusCode, b)
	}
}
