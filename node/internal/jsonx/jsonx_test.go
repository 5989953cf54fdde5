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
	for _, in := range []string{`{"paths":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 41)} {
		if err := DecodeStrict([]byte(in), &v); err == nil {
			t.Errorf("%.40s…: accepted", in)
		}
	}
}
