package routing

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestMarshalIsByteStable(t *testing.T) {
	d := sampleDocument()
	got := mustMarshal(t, d)
	want := `{"v":1,"revision":"` + d.Revision + `","routes":[` +
		`{"host":"*.shop.example.org","application":"shop","upstreams":[{"node":"vps-a","address":"10.83.0.1:24417","apiPort":7400},{"node":"vps-b","address":"10.83.0.2:24902","apiPort":7400}]},` +
		`{"host":"go.tito.io","application":"tito-go","upstreams":[{"node":"vps-b","address":"10.83.0.2:24600","apiPort":7400}],"healthPath":"/healthz"},` +
		`{"host":"shop.apps.example.com","application":"shop","upstreams":[{"node":"vps-a","address":"10.83.0.1:24417","apiPort":7400},{"node":"vps-b","address":"10.83.0.2:24902","apiPort":7400}]},` +
		`{"host":"ti.to","application":"tito-classic","upstreams":[{"node":"vps-a","address":"10.83.0.1:24500","apiPort":7400},{"node":"vps-c","address":"10.83.0.3:24500","apiPort":7400},{"node":"vps-b","address":"10.83.0.2:24500","apiPort":7400}],"paths":{"bigcorp":"go.tito.io","paulca":"go.tito.io"}}],` +
		`"api":{"hosts":["apps.example.com"],"upstreams":[{"node":"vps-a","address":"10.83.0.1:7400","apiPort":7400},{"node":"vps-b","address":"10.83.0.2:7400","apiPort":7400},{"node":"vps-c","address":"10.83.0.3:7400","apiPort":7400}],"denied":["/v1/storage","/v1/ingress/routes"]}}`
	if string(got) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}

	// The same content in another order, with nil where the original had empty, and
	// rebuilt maps: the same bytes, and the input left as it was.
	shuffled := cloneDocument(d)
	slices.Reverse(shuffled.Routes)
	shuffled.Routes[0].Paths = map[string]string{"paulca": "go.tito.io", "bigcorp": "go.tito.io"}
	again := mustMarshal(t, shuffled)
	if !bytes.Equal(got, again) {
		t.Fatalf("reordered input marshals differently:\n%s\n%s", got, again)
	}
	if shuffled.Routes[0].Host != "ti.to" {
		t.Fatal("Marshal sorted its input in place")
	}
}

func TestMarshalWritesEmptyListsNotNullAndKeepsAmpersands(t *testing.T) {
	d := &Document{V: 1, Revision: "r", Routes: []Route{{Host: "a.example", Application: "a", HealthPath: "/h&x<y>"}},
		API: &API{Hosts: []string{"apps.example"}}}
	got := mustMarshal(t, d)
	want := `{"v":1,"revision":"r","routes":[{"host":"a.example","application":"a","upstreams":[],"healthPath":"/h&x<y>"}],"api":{"hosts":["apps.example"],"upstreams":[],"denied":[]}}`
	if string(got) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", got, want)
	}
	if d.Routes[0].Upstreams != nil || d.API.Upstreams != nil {
		t.Fatal("Marshal modified its input")
	}
	empty := mustMarshal(t, &Document{V: 1})
	if string(empty) != `{"v":1,"revision":"","routes":[]}` {
		t.Fatalf("empty document = %s", empty)
	}
}

func TestDecodeRoundTripsMarshal(t *testing.T) {
	d := sampleDocument()
	b := mustMarshal(t, d)
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("Decode(Marshal(d)) = %+v, want %+v", got, d)
	}
	if ComputeRevision(got) != d.Revision {
		t.Fatal("decoded document hashes differently")
	}
}

func TestDecodeToleratesUnknownFieldsAndCanonicalises(t *testing.T) {
	in := `{"v":1,"revision":"x","future":{"a":1},"routes":[
		{"host":"b.example","application":"b","upstreams":null,"paths":{},"extra":true},
		{"host":"a.example","application":"a","upstreams":[{"node":"n","address":"10.0.0.1:80","weight":3}]}]}`
	d, err := Decode([]byte(in))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if d.Routes[0].Host != "a.example" || d.Routes[1].Host != "b.example" {
		t.Fatalf("routes not sorted: %+v", d.Routes)
	}
	if d.Routes[1].Upstreams == nil || d.Routes[1].Paths != nil {
		t.Fatalf("not canonical: %+v", d.Routes[1])
	}
}

// TestDecodeRefusesInvalidDocuments: what is not a routing document of version 1 is a
// decoding error naming no field (or the field v); the rules of its fields are
// TestDocumentValidate's, which Decode applies (TestDecodeValidatesWithValidate); one
// case here shows a refused field named from the decoded bytes.
func TestDecodeRefusesInvalidDocuments(t *testing.T) {
	up := `"upstreams":[{"node":"vps-a","address":"10.83.0.1:80"}]`
	for _, tc := range []struct {
		name, in, wantField, wantErr string
	}{
		{"not json", `{"v":1,`, "", "decoding routing document"},
		{"no version", `{"routes":[]}`, "v", "unsupported routing document version"},
		{"version 2", `{"v":2,"routes":[]}`, "v", "unsupported routing document version"},
		{"wrong type", `{"v":1,"routes":{}}`, "", "decoding routing document"},
		{"trailing garbage", `{"v":1,"routes":[]} x`, "", "decoding routing document"},
		{"duplicate host", `{"v":1,"revision":"x","routes":[{"host":"a.example","application":"a",` + up +
			`},{"host":"a.example","application":"b",` + up + `}]}`, "routes[1].host", "duplicate host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decode([]byte(tc.in))
			if err == nil {
				t.Fatalf("Decode accepted %+v", d)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
			field, ok := InvalidField(err)
			if tc.wantField == "" {
				if ok {
					t.Fatalf("syntax error reported as invalid field %q", field)
				}
				return
			}
			if !ok || field != tc.wantField || !errors.Is(err, ErrInvalid) {
				t.Fatalf("field = %q (%v), want %q", field, ok, tc.wantField)
			}
		})
	}
}
