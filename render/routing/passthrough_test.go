package routing

import (
	"strings"
	"testing"
)

// makePassthrough turns go.tito.io's route passthrough (no path map targets it there, so
// the prefixes of ti.to are dropped). Its rules are rows of TestDocumentValidate.
func makePassthrough(d *Document) {
	d.Routes[3].Paths = nil
	d.Routes[1].Passthrough = true
	d.Routes[1].HealthPath = ""
}

// TestPassthroughIsAdditive: a document without passthrough routes keeps its bytes (the
// fields are omitted; its revision: TestRevisionEncodingIsPinned), and the fields survive
// Marshal and Decode. (Turning passthrough or the PROXY protocol on moves the revision:
// TestRevisionMovesWhenAnyFieldChanges.)
func TestPassthroughIsAdditive(t *testing.T) {
	b := mustMarshal(t, sampleDocument())
	if strings.Contains(string(b), "passthrough") || strings.Contains(string(b), "proxyProtocol") {
		t.Fatalf("a document without passthrough writes the fields: %s", b)
	}
	pp := cloneDocument(sampleDocument())
	makePassthrough(pp)
	pp.Routes[1].ProxyProtocol = 2
	b, _ = Marshal(pp)
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("decoding a passthrough document: %v", err)
	}
	if !got.Routes[1].Passthrough || got.Routes[1].ProxyProtocol != 2 {
		t.Fatalf("round trip lost the fields: %+v", got.Routes[1])
	}
}
