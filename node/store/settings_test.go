package store_test

import (
	"testing"

	"github.com/scafo/ingress/internal/settings/settingstest"
	"github.com/scafo/ingress/node/store"
)

// TestStoreSettingsLoadOrAreRefusedNamingTheirSource: the store.* section read as the
// node reads it. An endpoint holding a credential (https://KEY:SECRET@host, KEY:SECRET@host,
// a path, a query, a fragment) was accepted, and the start line then logged it; it is
// refused naming store.s3.endpoint without repeating the value (from node/config_input_test.go's
// TestAnEndpointHoldingACredentialIsRefusedWithoutRepeatingIt; the S3 store's own refusal
// is node/store/s3's TestNewRejectsBadConfig). S3 settings without an
// endpoint are refused, not ignored (from node/config_strict_test.go's TestConfigRefusesMistakes).
func TestStoreSettingsLoadOrAreRefusedNamingTheirSource(t *testing.T) {
	section := settingstest.Section[store.Config]{Path: "store", Defaults: func() store.Config { return store.Config{} }, Validate: store.Config.Validate}
	cases := []settingstest.Case[store.Config]{
		{Name: "the dir store"},
		{Name: "a directory", Args: []string{"--store.dir.path=/srv/store"}, Set: func(c *store.Config) { c.Dir.Path = "/srv/store" }},
		{Name: "empty S3 settings beside no endpoint", File: "store:\n  s3:\n    endpoint: \"\"\n    bucket: \"\"\n    insecure: false\n"},
		{Name: "a bucket without an endpoint", Environ: []string{"SCAFO_STORE_S3_BUCKET=scafo"},
			Want: []string{"store.s3.bucket set without store.s3.endpoint", "store.s3.bucket from SCAFO_STORE_S3_BUCKET in the environment"}},
		{Name: "S3 settings without an endpoint in the file", File: "store:\n  s3:\n    bucket: scafo\n    insecure: true\n",
			Want: []string{"store.s3.bucket, store.s3.insecure set without store.s3.endpoint"}},
		{Name: "an endpoint without a bucket", Args: []string{"--store.s3.endpoint=10.0.0.9:9000"}, Want: []string{"store.s3.bucket: required with store.s3.endpoint"}},
	}
	for _, ep := range []string{"https://AKIA:s3cr3t@s3.example.com", "http://AKIA:s3cr3t@10.0.0.9:9000/", "AKIA:s3cr3t@s3.example.com:9000",
		"s3.example.com/bucket?X-Amz-Signature=s3cr3t", "s3.example.com#s3cr3t"} {
		cases = append(cases, settingstest.Case[store.Config]{Name: "a credential in " + ep, Args: []string{"--store.s3.endpoint=" + ep, "--store.s3.bucket=b"},
			Want: []string{"store.s3.endpoint: want host[:port]", "store.s3.endpoint from flag --store.s3.endpoint"}, Not: []string{"s3cr3t"}})
	}
	for _, ep := range []string{"s3.eu-west-1.amazonaws.com", "https://s3.eu-west-1.amazonaws.com/", "http://10.83.0.9:9000", "[::1]:9000"} {
		cases = append(cases, settingstest.Case[store.Config]{Name: "endpoint " + ep, Args: []string{"--store.s3.endpoint=" + ep, "--store.s3.bucket=b"},
			Set: func(c *store.Config) { c.S3.Endpoint, c.S3.Bucket = ep, "b" }})
	}
	section.Run(t, cases)
}

// TestStoreNamesItself: the start line's store= (Config.String).
func TestStoreNamesItself(t *testing.T) {
	for _, tc := range []struct {
		c    store.Config
		want string
	}{
		{store.Config{Dir: store.DirConfig{Path: "/var/lib/scafo/store"}}, "dir:/var/lib/scafo/store"},
		{store.Config{S3: store.S3Config{Endpoint: "10.83.0.9:9000", Bucket: "scafo"}}, "s3://10.83.0.9:9000/scafo"},
		{store.Config{S3: store.S3Config{Endpoint: "https://s3.eu-west-1.amazonaws.com", Bucket: "scafo", Prefix: "/fleet-a/"}}, "s3://s3.eu-west-1.amazonaws.com/scafo/fleet-a"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.c, got, tc.want)
		}
	}
}
