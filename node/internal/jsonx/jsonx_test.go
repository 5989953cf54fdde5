package jsonx

import (
	"strings"
	"testing"
)

type body struct {
	Paths *map[string]string `json:"paths"`
	Inner *struct {
		Port int `json:"port"`
	} `json:"inner,omitempty"`
	List []struct {
		Name string `json:"name"`
	} `json:"list,omitempty"`
}

func TestDecodeStrictMatchesKeysExactly(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string
	}{
		{`{"paths":{}}`, ""},
		{`{"paths":{"a":"x.example","A":"y.example"}}`, ""}, // map keys are data, not fields
		{`{"inner":{"port":1},"list":[{"name":"a"}]}`, ""},
		{`{"PATHS":{}}`, `unknown field "PATHS"`},
		{`{"Paths":{}}`, `unknown field "Paths"`},
		{`{"pathſ":{}}`, `unknown field "pathſ"`},
		{`{"paths":{},"paths":{"a":"b.example"}}`, `field "paths": duplicate key`},
		{`{"paths":{"a":"x.example","a":"y.example"}}`, `field "paths.a": duplicate key`},
		{`{"inner":{"Port":1}}`, `unknown field "inner.Port"`},
		{`{"list":[{"name":"a","NAME":"b"}]}`, `unknown field "list[0].NAME"`},
		{`{"paths":{}} {}`, "trailing data"},
		{`{"paths":{}}]`, "trailing data"},
		{`{"paths":{}}}`, "trailing data"},
		{`{"paths":{}}]{"paths":{"a":"b.example"}}`, "trailing data"},
		{`{"paths":{}} x`, "trailing data"},
		{"{\"paths\":{}} \n\t", ""},
		{`{"paths":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 41), "nested deeper than 32"},
		{`{"paths":`, "unexpected EOF"},
		{``, "empty body"},
	} {
		var v body
		err := DecodeStrict([]byte(tc.in), &v)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: got %v, want an error containing %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestDeeplyNestedBodiesAreRefusedCheaply(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	var v body
	allocs := testing.AllocsPerRun(1, func() {
		if err := DecodeStrict([]byte(deep), &v); err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Fatalf("got %v, want a refusal naming the depth", err)
		}
	})
	if allocs > 10000 {
		t.Fatalf("%v allocations to refuse a deep body: not cheap", allocs)
	}
}

func TestALongKeyOverManyElementsIsLinear(t *testing.T) {
	key := strings.Repeat("k", 32<<10)
	elems := strings.Repeat("0,", 80000) + "0"
	in := []byte(`{"paths":{"` + key + `":[` + elems + `]}}`)
	var v body
	allocs := testing.AllocsPerRun(1, func() { DecodeStrict(in, &v) })
	// Linear work is a few allocations per element; copying the key per element would be
	// 80 000 allocations of 32 KiB each.
	if allocs > 16*80000 {
		t.Fatalf("%v allocations", allocs)
	}
	res := testing.Benchmark(func(b *testing.B) {
		for range b.N {
			DecodeStrict(in, &v)
		}
	})
	if per := res.AllocedBytesPerOp(); per > 64<<20 {
		t.Fatalf("%d MB allocated for a %d KB body: not linear", per>>20, len(in)>>10)
	}
}

// TestDecodeStrictSpeaksJSON: a body or a field of the wrong JSON type is refused in
// JSON's words, never with a Go type name.
func TestDecodeStrictSpeaksJSON(t *testing.T) {
	type health struct {
		Path string `json:"path"`
	}
	type app struct {
		Account   string   `json:"account"`
		Placement []string `json:"placement"`
		Health    *health  `json:"health"`
		Port      int      `json:"port"`
	}
	for in, want := range map[string]string{
		`[]`:                    "the body must be a JSON object, got an array",
		`"x"`:                   "the body must be a JSON object, got a string",
		`{"placement":"n1"}`:    `field "placement": want a JSON array, got a string`,
		`{"health":"/healthz"}`: `field "health": want a JSON object, got a string`,
		`{"port":"80"}`:         `field "port": want an integer, got a string`,
		`{"account":true}`:      `field "account": want a string, got a boolean`,
		`{"port":1.5}`:          `field "port": want an integer, got a number (1.5)`,
	} {
		err := DecodeStrict([]byte(in), &app{})
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "jsonx.")) {
			t.Errorf("%s: %v names a Go type", in, err)
		}
	}
}
