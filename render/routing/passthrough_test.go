package routing

import (
	"strings"
	"testing"
)

// passthroughDocument is sampleDocument with go.tito.io's application terminating TLS
// itself (makePassthrough). Its rules are rows of TestDocumentValidate.
func passthroughDocument() *Document {
	d := cloneDocument(sampleDocument())
	makePassthrough(d)
	d.Seal()
	return d
}

// makePassthrough turns go.tito.io's route passthrough (no path map targets it there, so
// the prefixes of ti.to are dropped).
func makePassthrough(d *Document) {
	d.Routes[3].Paths = nil
	d.Routes[1].Passthrough = true
	d.Routes[1].HealthPath = ""
}

// TestPassthroughIsAdditive: a document without passthrough routes keeps its revision
// and its bytes (the fields are omitted), and turning passthrough or the PROXY protocol
// on moves the revision.
func TestPassthroughIsAdditive(t *testing.T) {
	plain := sampleDocument()
	b := mustMarshal(t, plain)
	if strings.Contains(string(b), "passthrough") || strings.Contains(string(b), "proxyProtocol") {
		t.Fatalf("a document without passthrough writes the fields: %s", b)
	}
	d := passthroughDocument()
	base := cloneDocument(d)
	base.Routes[1].Passthrough = false
	base.Seal()
	if d.Revision == base.Revision {
		t.Fatal("passthrough did not move the revision")
	}
	pp := cloneDocument(d)
	pp.Routes[1].ProxyProtocol = 2
	pp.Seal()
	if pp.Revision == d.Revision {
		t.Fatal("proxyProtocol did not move the revision")
	}
	b, _ = Marshal(pp)
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("decoding a passthrough document: %v", err)
	}
	if !got.Routes[1].Passthrough || got.Routes[1].ProxyProtocol != 2 {
		t.Fatalf("round trip lost the fields: %+v", got.Routes[1])
	}
}
