package traefikprovider

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestNewRejectsBadConfiguration(t *testing.T) {
	type bad struct {
		name    string
		edit    func(c *Config)
		env     string // value of SCAFO_INGRESS_TOKEN
		wantErr string
	}
	cases := []bad{
		{name: "no endpoints", edit: func(c *Config) { c.Endpoints = nil }, wantErr: "endpoints: at least one node URL is required"},
		{name: "empty endpoint", edit: func(c *Config) { c.Endpoints = []string{"http://a:7400", " "} }, wantErr: `endpoints[1] " ": empty`},
		{name: "no scheme", edit: func(c *Config) { c.Endpoints = []string{"10.83.0.1:7400"} }, wantErr: `endpoints[0] "10.83.0.1:7400"`},
		{name: "ftp scheme", edit: func(c *Config) { c.Endpoints = []string{"ftp://a"} }, wantErr: "scheme must be http or https"},
		{name: "no host", edit: func(c *Config) { c.Endpoints = []string{"http:///v1"} }, wantErr: "no host"},
		{name: "credentials in URL", edit: func(c *Config) { c.Endpoints = []string{"http://u:p@a"} }, wantErr: "credentials in the URL"},
		{name: "no token anywhere", edit: func(c *Config) { c.Token = "" }, wantErr: "token: empty, and the environment variable SCAFO_INGRESS_TOKEN (tokenEnv) is unset or empty"},
		{name: "no token, no tokenEnv", edit: func(c *Config) { c.Token, c.TokenEnv = "", "" }, env: "from-env", wantErr: "token: empty, and tokenEnv names no environment variable"},
		{name: "token with newline", edit: func(c *Config) { c.Token = "a\nb" }, wantErr: "token: contains a line break"},
		{name: "bad pollInterval", edit: func(c *Config) { c.PollInterval = "5" }, wantErr: `pollInterval: "5" is not a duration`},
		{name: "zero pollTimeout", edit: func(c *Config) { c.PollTimeout = "0s" }, wantErr: `pollTimeout: "0s" must be above zero`},
		{name: "group with a capital", edit: func(c *Config) { c.Group = "EU-1" }, wantErr: `group: "EU-1" is not a group name`},
		{name: "group with an empty name", edit: func(c *Config) { c.Group = "eu-1,,eu-2" }, wantErr: `group: "" is not a group name`},
		{name: "group listed twice", edit: func(c *Config) { c.Group = "eu-1, eu-1" }, wantErr: `group: "eu-1" is listed twice`},
		{name: "group with a query", edit: func(c *Config) { c.Group = "eu-1&prefer=x" }, wantErr: `is not a group name`},
		{name: "too many groups", edit: func(c *Config) { c.Group = strings.Repeat("g,", 16) + "g" }, wantErr: "group: 17 names, at most 16"},
		{name: "negative watchWait", edit: func(c *Config) { c.WatchWait = "-1s" }, wantErr: `watchWait: "-1s" must be above zero`},
		{name: "negative appliedDelay", edit: func(c *Config) { c.AppliedDelay = "-1s" }, wantErr: "appliedDelay"},
	}
	for _, v := range []string{"Edge", "edge_1", "-edge", "edge.", strings.Repeat("a", 64)} {
		cases = append(cases, bad{name: "name " + v, edit: func(c *Config) { c.Name = v }, wantErr: "invalid configuration: name: "})
	}
	for _, v := range []string{"127.0.0.1:80", "ftp://127.0.0.1", "http://", "http://u:p@127.0.0.1", "http://127.0.0.1/x", "http://127.0.0.1/?a=b", "http://127.0.0.1/#f", "http://%zz"} {
		cases = append(cases, bad{name: "appliedProbe " + v, edit: func(c *Config) { c.AppliedProbe = v }, wantErr: "invalid configuration: appliedProbe"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SCAFO_INGRESS_TOKEN", tc.env)
			c := testConfig("http://10.83.0.1:7400")
			tc.edit(c)
			_, err := New(context.Background(), c, "plugin-scafo")
			if err == nil {
				t.Fatalf("New accepted the configuration, want error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "plugin-scafo: invalid configuration: ") {
				t.Errorf("error %q does not name the provider", err)
			}
		})
	}
}

func TestNewAcceptsConfiguration(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(c *Config)
		env       string
		endpoints []string
		token     string
		check     func(t *testing.T, s settings)
	}{
		{
			name:      "defaults",
			edit:      func(c *Config) {},
			endpoints: []string{"http://10.83.0.1:7400/v1/ingress/traefik"},
			token:     testToken,
			check: func(t *testing.T, s settings) {
				if s.pollInterval != 5*time.Second || s.pollTimeout != 5*time.Second || s.watchWait != 30*time.Second || !s.watch {
					t.Errorf("defaults: %+v", s)
				}
				// The name defaults to the host name (its first label if the whole is not a name).
				if host, _ := os.Hostname(); s.name != strings.ToLower(host) && !strings.HasPrefix(strings.ToLower(host), s.name+".") {
					t.Errorf("default name %q, want the host name %q", s.name, host)
				}
			},
		},
		{
			name:      "appliedProbe, trimmed and without its slash",
			edit:      func(c *Config) { c.AppliedProbe = " http://127.0.0.1:80/ " },
			endpoints: []string{"http://10.83.0.1:7400/v1/ingress/traefik"},
			token:     testToken,
			check: func(t *testing.T, s settings) {
				if s.appliedProbe != "http://127.0.0.1:80" {
					t.Errorf("appliedProbe %q", s.appliedProbe)
				}
			},
		},
		{
			name: "prefer, trailing slash, path already given, https",
			edit: func(c *Config) {
				c.Prefer = "vps a&b"
				c.Endpoints = []string{"http://a:7400/", " https://b/v1/ingress/traefik ", "http://c/base"}
			},
			endpoints: []string{
				"http://a:7400/v1/ingress/traefik?prefer=vps+a%26b",
				"https://b/v1/ingress/traefik?prefer=vps+a%26b",
				"http://c/base/v1/ingress/traefik?prefer=vps+a%26b",
			},
			token: testToken,
		},
		{
			name: "groups and prefer",
			edit: func(c *Config) {
				c.Prefer, c.Group = "vps-a", " eu-1 , eu-2"
				c.Endpoints = []string{"http://a:7400/", "http://b:7400/v1/ingress/traefik"}
			},
			endpoints: []string{
				"http://a:7400/v1/ingress/traefik?group=eu-1%2Ceu-2&prefer=vps-a",
				"http://b:7400/v1/ingress/traefik?group=eu-1%2Ceu-2&prefer=vps-a",
			},
			token: testToken,
		},
		{
			name:      "token from the environment",
			edit:      func(c *Config) { c.Token = "" },
			env:       " from-env\n",
			endpoints: []string{"http://10.83.0.1:7400/v1/ingress/traefik"},
			token:     "from-env",
		},
		{
			name:      "token from another variable",
			edit:      func(c *Config) { c.Token, c.TokenEnv = "", "SCAFO_TEST_OTHER_TOKEN" },
			endpoints: []string{"http://10.83.0.1:7400/v1/ingress/traefik"},
			token:     "other",
		},
		{
			name: "empty durations mean defaults; watch off",
			edit: func(c *Config) {
				c.PollInterval, c.PollTimeout, c.WatchWait, c.Watch = "", " ", "", false
			},
			endpoints: []string{"http://10.83.0.1:7400/v1/ingress/traefik"},
			token:     testToken,
			check: func(t *testing.T, s settings) {
				if s.pollInterval != 5*time.Second || s.pollTimeout != 5*time.Second || s.watchWait != 30*time.Second || s.watch {
					t.Errorf("settings: %+v", s)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SCAFO_INGRESS_TOKEN", tc.env)
			t.Setenv("SCAFO_TEST_OTHER_TOKEN", "other")
			c := CreateConfig()
			c.Endpoints = []string{"http://10.83.0.1:7400"}
			c.Token = testToken
			tc.edit(c)
			p, err := New(context.Background(), c, "plugin-scafo")
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if strings.Join(p.s.endpoints, " ") != strings.Join(tc.endpoints, " ") {
				t.Errorf("endpoints %q, want %q", p.s.endpoints, tc.endpoints)
			}
			if p.s.token != tc.token {
				t.Errorf("token %q, want %q", p.s.token, tc.token)
			}
			if tc.check != nil {
				tc.check(t, p.s)
			}
		})
	}
}
