package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/certstore"
	"github.com/scafo/ingress/node/store"
)

// storageNode is the API in process, and its store.
func storageNode(t *testing.T) (*inProcess, store.Store) {
	t.Helper()
	n := newInProcess(t, nil)
	return n, n.Store
}

// outsideNamespace is every store key and etag outside the certificate namespace (and
// outside nodes/, which heartbeats rewrite).
func outsideNamespace(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	es, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range es {
		if !strings.HasPrefix(e.Key, certstore.DataPrefix) && !strings.HasPrefix(e.Key, certstore.LockPrefix) && !strings.HasPrefix(e.Key, "nodes/") {
			out[e.Key] = e.ETag
		}
	}
	return out
}

// TestStorageKeysRoundTripOverHTTP: load, store, stat, HEAD, list and delete through the
// node, with keys whose characters need escaping, including an escaped slash that must
// stay inside its key.
func TestStorageKeysRoundTripOverHTTP(t *testing.T) {
	t.Parallel()
	n, _ := storageNode(t)
	tok := ipIngress
	// "*.example.com" and "@:" spelled raw and escaped; %2F is a "/" (one meaning).
	n.Must(200, "PUT", "/v1/storage/keys/certificates/acme/%2A.example.com/%2A.example.com.crt", tok, "CERT")
	n.Must(200, "PUT", "/v1/storage/keys/certificates%2Facme/u@h:1/k", tok, "KEY")
	n.Must(200, "PUT", "/v1/storage/keys/lit/a%25252Fb", tok, "double") // key "lit/a%252Fb"
	if b := n.Must(200, "GET", "/v1/storage/keys/certificates/acme/*.example.com/*.example.com.crt", tok, ""); string(b) != "CERT" {
		t.Fatalf("load = %q", b)
	}
	if b := n.Must(200, "GET", "/v1/storage/keys/certificates/acme/u@h:1/k", tok, ""); string(b) != "KEY" {
		t.Fatalf("load = %q", b)
	}
	if b := n.Must(200, "GET", "/v1/storage/keys/lit?list", tok, ""); string(b) != `{"keys":["lit/a%252Fb"]}`+"\n" {
		t.Fatalf("list lit = %s", b)
	}
	b := n.Must(200, "GET", "/v1/storage/keys/certificates?list&recursive=1", tok, "")
	want := `{"keys":["certificates/acme","certificates/acme/*.example.com","certificates/acme/*.example.com/*.example.com.crt","certificates/acme/u@h:1","certificates/acme/u@h:1/k"]}` + "\n"
	if string(b) != want {
		t.Fatalf("recursive list:\n got %s\nwant %s", b, want)
	}
	if b := n.Must(200, "GET", "/v1/storage/keys/certificates?list", tok, ""); string(b) != `{"keys":["certificates/acme"]}`+"\n" {
		t.Fatalf("list = %s", b)
	}
	var st struct {
		Key      string
		Size     int64
		Terminal bool
		Modified time.Time
	}
	json.Unmarshal(n.Must(200, "GET", "/v1/storage/keys/certificates/acme/u@h:1/k?stat", tok, ""), &st)
	if st.Key != "certificates/acme/u@h:1/k" || st.Size != 3 || !st.Terminal || time.Since(st.Modified) > time.Minute {
		t.Fatalf("stat = %+v", st)
	}
	json.Unmarshal(n.Must(200, "GET", "/v1/storage/keys/certificates/acme?stat", tok, ""), &st)
	if st.Terminal || st.Size != 0 {
		t.Fatalf("stat of a directory = %+v", st)
	}
	resp, _ := n.Do("HEAD", "/v1/storage/keys/certificates/acme/u@h:1/k", tok, "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Scafo-Size") != "3" || resp.Header.Get("X-Scafo-Terminal") != "true" {
		t.Fatalf("HEAD = %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := n.Do("HEAD", "/v1/storage/keys/nope", tok, ""); resp.StatusCode != 404 {
		t.Fatalf("HEAD absent = %d", resp.StatusCode)
	}
	n.Must(404, "GET", "/v1/storage/keys/nope?list", tok, "")
	n.Must(200, "DELETE", "/v1/storage/keys/certificates/acme", tok, "")
	n.Must(200, "DELETE", "/v1/storage/keys/certificates/acme", tok, "") // absent: still 200
	n.Must(404, "GET", "/v1/storage/keys/certificates?list", tok, "")
	if b := n.Must(200, "GET", "/v1/storage/keys?list&recursive=true", tok, ""); string(b) != `{"keys":["lit","lit/a%252Fb"]}`+"\n" {
		t.Fatalf("root list = %s", b)
	}
}

// TestStorageRefusesTraversalInEverySpelling: no spelling of a key reaches outside the
// namespace; each bad one is a 400 naming the key, and nothing outside certs/ moves.
func TestStorageRefusesTraversalInEverySpelling(t *testing.T) {
	t.Parallel()
	n, st := storageNode(t)
	before := outsideNamespace(t, st)
	tok := ipIngress
	for _, target := range []string{
		"/v1/storage/keys/../../v1/status",
		"/v1/storage/keys/..",
		"/v1/storage/keys/a/../../serial",
		"/v1/storage/keys/%2e%2e/serial",
		"/v1/storage/keys/%2E%2E%2Fserial",
		"/v1/storage/keys/a/%2e%2e%2f%2e%2e%2fapps%2fshop.json",
		"/v1/storage/keys/.",
		"/v1/storage/keys/./a",
		"/v1/storage/keys//serial",
		"/v1/storage/keys/%2Fserial",
		"/v1/storage/keys/a//b",
		"/v1/storage/keys/a/",
		"/v1/storage/keys/a%00b",
		"/v1/storage/keys/a%0ab",
		"/v1/storage/keys/a%5C..%5Cb",
		"/v1/storage/keys/%ff",
		"/v1/storage/keys/" + strings.Repeat("a", certstore.MaxKeyLen+1),
	} {
		for _, method := range []string{"GET", "PUT", "DELETE"} {
			code, body := n.raw(method, target, tok, "x")
			if code != http.StatusBadRequest || !strings.Contains(body, `"error":"invalid key"`) {
				t.Errorf("%s %s = %d %s, want 400 invalid key", method, target, code, body)
			}
		}
	}
	// Double encoding is a literal key, stored inside the namespace.
	if code, body := n.raw("PUT", "/v1/storage/keys/%252e%252e/%252e%252e/serial", tok, "x"); code != http.StatusOK || !strings.Contains(body, `"key":"%2e%2e/%2e%2e/serial"`) {
		t.Fatalf("double-encoded PUT = %d %s", code, body)
	}
	if _, err := st.Get(context.Background(), "certs/%252e%252e/%252e%252e/serial!"); err != nil {
		t.Fatalf("the double-encoded key is not the literal key in the namespace: %v", err)
	}
	// A lock name is one opaque segment: slashes and dots are part of it, inside the
	// lock namespace.
	if code, body := n.raw("POST", "/v1/storage/locks/..%2F..%2Fapps%2Fshop.json", tok, `{"owner":"o"}`); code != 200 {
		t.Fatalf("lock with a slashed name = %d %s", code, body)
	}
	if _, err := st.Get(context.Background(), "certlocks/%2E.%2F..%2Fapps%2Fshop.json!"); err != nil {
		t.Fatalf("the lock is not where the mapping puts it: %v", err)
	}
	for _, target := range []string{"/v1/storage/locks/", "/v1/storage/locks/a%00"} {
		if code, body := n.raw("POST", target, tok, `{"owner":"o"}`); code != 400 || !strings.Contains(body, "invalid lock name") {
			t.Errorf("POST %s = %d %s, want 400 invalid lock name", target, code, body)
		}
	}
	after := outsideNamespace(t, st)
	if len(after) != len(before) {
		t.Fatalf("objects outside the namespace changed: before %v, after %v", before, after)
	}
	for k, e := range before {
		if after[k] != e {
			t.Fatalf("object %s outside the namespace changed", k)
		}
	}
}

// TestStorageBoundsBodiesAndQueries: a value over 1 MiB is 413 (announced or not), and
// nothing is written; unknown query parameters and bad lock bodies are 400 naming the
// field.
func TestStorageBoundsBodiesAndQueries(t *testing.T) {
	t.Parallel()
	n, _ := storageNode(t)
	tok := ipIngress
	limit := certstore.DefaultMaxValueSize
	n.Must(200, "PUT", "/v1/storage/keys/ok", tok, strings.Repeat("x", limit))
	resp, b := n.Do("PUT", "/v1/storage/keys/big", tok, strings.Repeat("x", limit+1))
	if resp.StatusCode != 413 || !strings.Contains(string(b), "value too large") {
		t.Fatalf("1 MiB + 1 = %d %s", resp.StatusCode, b)
	}
	// Chunked: no Content-Length, the limit still holds.
	req := httptest.NewRequest("PUT", "http://127.0.0.1/v1/storage/keys/big", io.MultiReader(strings.NewReader(strings.Repeat("y", limit)), strings.NewReader("yy")))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.ContentLength = -1
	if r2 := n.Serve(req); r2.Code != 413 {
		t.Fatalf("chunked oversized = %d", r2.Code)
	}
	n.Must(404, "GET", "/v1/storage/keys/big", tok, "")
	for _, c := range []struct{ method, path, body, want string }{
		{"GET", "/v1/storage/keys/ok?lst", "", `\"lst\"`},
		{"GET", "/v1/storage/keys/ok?list&stat", "", "exclusive"},
		{"GET", "/v1/storage/keys/ok?recursive=1", "", "list only"},
		{"GET", "/v1/storage/keys/ok?list&recursive=maybe", "", `\"recursive\"`},
		{"PUT", "/v1/storage/keys/ok?x=1", "v", `\"x\"`},
		{"POST", "/v1/storage/locks/l", `{}`, `\"owner\"`},
		{"POST", "/v1/storage/locks/l", `{"owner":"o","lease":"forever"}`, `\"lease\"`},
		{"POST", "/v1/storage/locks/l", `{"owner":"o","lease":"1ms"}`, "lease"},
		{"POST", "/v1/storage/locks/l", `{"owner":"o","lease":"2h"}`, "lease"},
		{"POST", "/v1/storage/locks/l", `{"owner":"has space"}`, "owner"},
		{"POST", "/v1/storage/locks/l", `{"owner":"o","Owner":"p"}`, "Owner"},
		{"POST", "/v1/storage/locks/l", `{"owner":"o","owner":"p"}`, "owner"},
		{"POST", "/v1/storage/locks/l", `{"owner":"o","extra":1}`, "extra"},
		{"POST", "/v1/storage/locks/l?x", `{"owner":"o"}`, "query"},
		{"DELETE", "/v1/storage/locks/l", `{"owner":"o","lease":"1m"}`, "owner"},
	} {
		resp, b := n.Do(c.method, c.path, tok, c.body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), c.want) || !strings.Contains(string(b), `"detail"`) {
			t.Errorf("%s %s %s = %d %s, want 400 naming %s", c.method, c.path, c.body, resp.StatusCode, b, c.want)
		}
	}
	resp, b = n.Do("POST", "/v1/storage/locks/l", tok, `{"owner":"`+strings.Repeat("o", 5000)+`"}`)
	if resp.StatusCode != 413 {
		t.Errorf("a 5 kB lock body = %d %s, want 413", resp.StatusCode, b)
	}
}

// TestStorageLocksOverHTTP: take, conflict (409 with when it frees, never the holder's
// owner token), renew, release only by the owner, each answered with its status. Which
// renewals and takeovers the locks allow (another owner's renewal, a corrupt lock
// object) is certstore's (TestRenewNeverRetakesALostLock, TestCorruptLockIsTakenOver).
func TestStorageLocksOverHTTP(t *testing.T) {
	t.Parallel()
	n, _ := storageNode(t)
	tok := ipIngress
	var l struct {
		Name, Holder      string
		Acquired, Expires time.Time
	}
	json.Unmarshal(n.Must(200, "POST", "/v1/storage/locks/issue_cert_*.example.com", tok, `{"owner":"alice","lease":"30s"}`), &l)
	if l.Name != "issue_cert_*.example.com" || l.Holder != "vps-a" || time.Until(l.Expires) < 25*time.Second {
		t.Fatalf("lease = %+v", l)
	}
	resp, b := n.Do("POST", "/v1/storage/locks/issue_cert_*.example.com", tok, `{"owner":"mallory","lease":"30s"}`)
	if resp.StatusCode != 409 || !strings.Contains(string(b), "lock held") || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Scafo-Lock-Expires") == "" {
		t.Fatalf("second owner = %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if strings.Contains(string(b), "alice") {
		t.Fatalf("a conflict reveals the holder's owner token: %s", b)
	}
	// Another owner cannot release it.
	if resp, b := n.Do("DELETE", "/v1/storage/locks/issue_cert_*.example.com", tok, `{"owner":"mallory"}`); resp.StatusCode != 409 || !strings.Contains(string(b), "not lock owner") {
		t.Fatalf("release by another owner = %d %s", resp.StatusCode, b)
	}
	n.Must(200, "POST", "/v1/storage/locks/issue_cert_*.example.com", tok, `{"owner":"alice","renew":true}`)
	n.Must(200, "DELETE", "/v1/storage/locks/issue_cert_*.example.com", tok, `{"owner":"alice"}`)
	n.Must(200, "DELETE", "/v1/storage/locks/issue_cert_*.example.com", tok, `{"owner":"alice"}`) // released: still 200
	if resp, b := n.Do("POST", "/v1/storage/locks/issue_cert_*.example.com", tok, `{"owner":"alice","renew":true}`); resp.StatusCode != 409 || !strings.Contains(string(b), "lock lost") {
		t.Fatalf("renewing a released lock = %d %s", resp.StatusCode, b)
	}
	// The metrics count each operation.
	_, m := n.Get("/metrics", "")
	for _, want := range []string{
		`scafo_storage_requests_total{code="200",op="lock"}`,
		`scafo_storage_requests_total{code="409",op="lock"}`,
		`scafo_storage_requests_total{code="200",op="unlock"}`,
		`scafo_storage_request_duration_seconds_count{op="lock"}`,
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestStorageServesACorruptObjectAsAnError: an object edited in the store is a 500
// naming the problem, never bytes served as a certificate.
func TestStorageServesACorruptObjectAsAnError(t *testing.T) {
	t.Parallel()
	n, st := storageNode(t)
	if _, err := st.Put(context.Background(), "certs/a/b.key!", []byte("-----BEGIN PRIVATE KEY-----"), store.Condition{}); err != nil {
		t.Fatal(err)
	}
	resp, b := n.Do("GET", "/v1/storage/keys/a/b.key", ipIngress, "")
	if resp.StatusCode != 500 || !strings.Contains(string(b), "corrupt store object") || strings.Contains(string(b), "BEGIN") {
		t.Fatalf("corrupt object = %d %s", resp.StatusCode, b)
	}
}
