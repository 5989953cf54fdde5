package traefikprovider

import (
	"strings"
	"testing"
)

func TestCheckConfiguration(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    string // "" means: unchanged
		wantErr string
	}{
		{name: "routers and services", in: `{"http":{"routers":{"a":{}},"services":{"s":{}}}}`},
		{name: "services only", in: `{"http":{"services":{"s":{}}}}`},
		{name: "tcp only", in: `{"tcp":{"routers":{}}}`},
		{name: "middlewares and router references kept", in: `{"http":{"routers":{"a":{"middlewares":["scafo-retry"],"service":"s"}},"services":{"s":{}},"middlewares":{"scafo-retry":{"retry":{"attempts":12,"initialInterval":"200ms"}}}}}`},
		{name: "middlewares only", in: `{"http":{"middlewares":{"m":{"retry":{"attempts":2}}}}}`},
		{name: "tls options only", in: ` {"tls":{"options":{"default":{}}}}` + "\n"},
		{name: "explicitly empty maps stay as they are", in: `{"http":{"routers":{},"services":{}}}`},
		{name: "empty object", in: `{}`, want: `{"http":{"routers":{},"services":{}}}`},
		{name: "empty http", in: `{"http":{}}`, want: `{"http":{"routers":{},"services":{}}}`},
		{name: "null maps", in: `{"http":{"routers":null,"services":null},"tcp":null}`, want: `{"http":{"routers":{},"services":{}},"tcp":null}`},
		{name: "other http keys kept", in: `{"http":{"serversTransports":{"t":{}}}}`, want: `{"http":{"routers":{},"serversTransports":{"t":{}},"services":{}}}`},
		{name: "empty", in: "  ", wantErr: "empty body"},
		{name: "array", in: `[{}]`, wantErr: "not a JSON object"},
		{name: "truncated", in: `{"http":{"routers":{}`, wantErr: "not valid JSON"},
		{name: "two objects", in: `{}{}`, wantErr: "not valid JSON"},
		{name: "section not an object", in: `{"tcp":"x"}`, wantErr: "tcp: not a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkConfiguration([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("checkConfiguration: %v", err)
			}
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if string(got) != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}
