package traefikprovider

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults applied by CreateConfig, and to any duration left empty.
const (
	DefaultPollInterval = "5s"
	DefaultPollTimeout  = "5s"
	DefaultWatchWait    = "30s"
	DefaultTokenEnv     = "SCAFO_INGRESS_TOKEN"
	DefaultAppliedDelay = "500ms"
)

// ingressPath is the node route serving the rendered Traefik dynamic configuration.
const ingressPath = "/v1/ingress/traefik"

// Config is the plugin's configuration, the map under providers.plugin.<name> in
// Traefik's static configuration. Traefik decodes that map into the value returned by
// CreateConfig, matching keys to field names case-insensitively and converting
// strings ("true", "a,b") to the field's type.
type Config struct {
	// Endpoints lists node base URLs ("http://10.83.0.1:7400"), tried in order,
	// round robin. At least one is required. A URL that already ends in
	// /v1/ingress/traefik is used as given.
	Endpoints []string `json:"endpoints,omitempty"`
	// Token is the ingress token, sent as "Authorization: Bearer <token>". When
	// empty, the token is read from the environment variable named by TokenEnv.
	Token string `json:"token,omitempty"`
	// TokenEnv names the environment variable holding the token when Token is empty
	// (default SCAFO_INGRESS_TOKEN). Traefik's static configuration file does not
	// expand environment variables; this is how a file-based setup keeps the token
	// out of the file.
	TokenEnv string `json:"tokenEnv,omitempty"`
	// Prefer is a node name, passed as ?prefer=: that node's instances come first
	// in every upstream list. Empty omits the parameter.
	Prefer string `json:"prefer,omitempty"`
	// Group names the ingress groups this Traefik serves, comma-separated
	// ("eu-1" or "eu-1,eu-2"), passed as ?group=: the node then sends only those
	// groups' hosts (plus the API apex and the services their path maps need), and a
	// change in another group does not reach this Traefik at all. Empty: every group.
	// A group the node does not know is a 404, never an empty configuration: the
	// last good configuration stays.
	Group string `json:"group,omitempty"`
	// PollInterval is the time between polls when Watch is off, and the back-off
	// between attempts once every endpoint has failed. Default 5s.
	PollInterval string `json:"pollInterval,omitempty"`
	// PollTimeout bounds one request (connect, headers, body). A long-poll gets
	// WatchWait on top. Default 5s.
	PollTimeout string `json:"pollTimeout,omitempty"`
	// Watch long-polls (If-None-Match + ?wait=WatchWait) so a change arrives as soon
	// as the node has it. Default true.
	Watch bool `json:"watch,omitempty"`
	// WatchWait is how long a node may hold a long-poll before answering 304.
	// Default 30s.
	WatchWait string `json:"watchWait,omitempty"`
	// Name is this ingress's name in the nodes' reports (X-Scafo-Ingress): 1..63
	// bytes of [a-z0-9.-]. Default: the host name, lowercased (its first label when
	// longer than 63 bytes).
	Name string `json:"name,omitempty"`
	// AppliedDelay is how long Traefik is given to apply a configuration before the
	// plugin reports it applied (Traefik tells a provider nothing): the next poll
	// waits that long after a configuration is handed over. Default 500ms; raise it
	// for configurations that take Traefik longer to build.
	AppliedDelay string `json:"appliedDelay,omitempty"`
	// AppliedProbe, when set, makes "applied" an observation instead of a delay: the
	// URL of one of this Traefik's own HTTP entrypoints as the Traefik process reaches
	// it ("http://127.0.0.1:80"), answered by Traefik without a redirection or an
	// entrypoint middleware in the way. Every configuration handed over carries one
	// more router (scafo-applied-probe: Host scafo-applied.invalid and a path unique
	// to that configuration and this start, to Traefik's noop@internal service), and
	// the plugin reports a configuration applied once this Traefik answers that path
	// with noop's 418: the routers of that configuration are then the ones serving.
	// AppliedDelay is then unused. Empty (the default): AppliedDelay.
	AppliedProbe string `json:"appliedProbe,omitempty"`
	// StateFile keeps the last configuration applied, so a Traefik that starts while
	// no node answers routes from it. Default "<provider name>.last.json" in Traefik's
	// working directory (plugin-scafo.last.json for providers.plugin.scafo); "off"
	// keeps none.
	StateFile string `json:"stateFile,omitempty"`
}

// CreateConfig returns the default configuration. Traefik calls it before decoding
// the user's settings over it.
func CreateConfig() *Config {
	return &Config{
		TokenEnv:     DefaultTokenEnv,
		PollInterval: DefaultPollInterval,
		PollTimeout:  DefaultPollTimeout,
		Watch:        true,
		WatchWait:    DefaultWatchWait,
		AppliedDelay: DefaultAppliedDelay,
	}
}

// settings is a validated Config.
type settings struct {
	endpoints    []string // full URLs of the ingress route, query included
	token        string
	pollInterval time.Duration
	pollTimeout  time.Duration
	watch        bool
	watchWait    time.Duration
	name         string
	appliedDelay time.Duration
	appliedProbe string // base URL of an entrypoint of this Traefik, "" for none
	stateFile    string // "" keeps none
	// defaultStateFile: StateFile was left empty; New names the file after the
	// provider.
	defaultStateFile bool
}

// parseConfig validates c and resolves the token. Every error names the setting.
func parseConfig(c *Config) (settings, error) {
	var s settings
	if c == nil {
		return s, errors.New("no configuration")
	}

	if len(c.Endpoints) == 0 {
		return s, errors.New("endpoints: at least one node URL is required")
	}
	group, err := parseGroup(c.Group)
	if err != nil {
		return s, err
	}
	for i, raw := range c.Endpoints {
		u, err := endpointURL(raw, c.Prefer, group)
		if err != nil {
			return s, fmt.Errorf("endpoints[%d] %q: %w", i, raw, err)
		}
		s.endpoints = append(s.endpoints, u)
	}

	s.token = strings.TrimSpace(c.Token)
	if s.token == "" && c.TokenEnv != "" {
		s.token = strings.TrimSpace(os.Getenv(c.TokenEnv))
	}
	if s.token == "" {
		if c.TokenEnv == "" {
			return s, errors.New("token: empty, and tokenEnv names no environment variable")
		}
		return s, fmt.Errorf("token: empty, and the environment variable %s (tokenEnv) is unset or empty", c.TokenEnv)
	}
	if strings.ContainsAny(s.token, "\r\n") {
		return s, errors.New("token: contains a line break")
	}

	if s.pollInterval, err = parsePositive("pollInterval", c.PollInterval, DefaultPollInterval); err != nil {
		return s, err
	}
	if s.pollTimeout, err = parsePositive("pollTimeout", c.PollTimeout, DefaultPollTimeout); err != nil {
		return s, err
	}
	if s.watchWait, err = parsePositive("watchWait", c.WatchWait, DefaultWatchWait); err != nil {
		return s, err
	}
	s.watch = c.Watch
	if s.appliedDelay, err = parseNonNegative("appliedDelay", c.AppliedDelay, DefaultAppliedDelay); err != nil {
		return s, err
	}

	if s.appliedProbe, err = parseProbe(c.AppliedProbe); err != nil {
		return s, err
	}

	s.name = strings.TrimSpace(c.Name)
	if s.name == "" {
		host, herr := os.Hostname()
		if herr != nil {
			return s, fmt.Errorf("name: empty, and the host name is unknown (%v): set name", herr)
		}
		s.name = strings.ToLower(host)
		if len(s.name) > 63 {
			s.name = strings.SplitN(s.name, ".", 2)[0]
		}
		if err := checkName(s.name); err != nil {
			return s, fmt.Errorf("name: empty, and the host name %q is not a valid name (%v): set name", host, err)
		}
	} else if err := checkName(s.name); err != nil {
		return s, fmt.Errorf("name: %v", err)
	}

	switch f := strings.TrimSpace(c.StateFile); f {
	case "off":
	case "":
		s.stateFile = "" // filled by New, which knows the provider name
		s.defaultStateFile = true
	default:
		s.stateFile = f
	}

	return s, nil
}

// checkName validates an ingress name as the nodes do: 1..63 bytes of [a-z0-9.-],
// starting and ending with a letter or digit.
func checkName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%q: want 1..63 bytes", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if (c == '-' || c == '.') && i > 0 && i < len(s)-1 {
			ok = true
		}
		if !ok {
			return fmt.Errorf("%q: want [a-z0-9.-], starting and ending with a letter or digit", s)
		}
	}
	return nil
}

// parseNonNegative parses a Go duration that may be zero; empty means def.
func parseNonNegative(field, value, def string) (time.Duration, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		value = def
	}
	d, err := time.ParseDuration(value)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration (e.g. \"500ms\"): %w", field, value, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s: %q must not be negative", field, value)
	}
	return d, nil
}

// endpointURL turns a node base URL into the URL of its ingress route.
func endpointURL(raw, prefer, group string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("scheme must be http or https")
	}
	if u.Host == "" {
		return "", errors.New("no host")
	}
	if u.User != nil {
		return "", errors.New("credentials in the URL are not supported; use token")
	}
	if u.Fragment != "" {
		return "", errors.New("fragment not allowed")
	}

	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, ingressPath) {
		p += ingressPath
	}
	u.Path = p
	u.RawPath = ""

	if prefer != "" || group != "" {
		q := u.Query()
		if prefer != "" {
			q.Set("prefer", prefer)
		}
		if group != "" {
			q.Set("group", group)
		}
		u.RawQuery = q.Encode()
	}

	return u.String(), nil
}

// parsePositive parses a Go duration that must be above zero; empty means def.
func parsePositive(field, value, def string) (time.Duration, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		value = def
	}
	d, err := time.ParseDuration(value)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration (e.g. \"5s\"): %w", field, value, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s: %q must be above zero", field, value)
	}
	return d, nil
}

// maxGroups is the most groups the node accepts in one ?group=.
const maxGroups = 16

// parseGroup checks the group setting as the node will (each name a DNS label: a-z,
// 0-9 and '-', not at either end, at most 63 bytes; at most 16 names; none twice), so
// that a typo fails at startup rather than as a 400 on every poll. Spaces around names
// are dropped; the result is comma-joined in the order given.
func parseGroup(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	names := strings.Split(v, ",")
	if len(names) > maxGroups {
		return "", fmt.Errorf("group: %d names, at most %d", len(names), maxGroups)
	}
	seen := map[string]bool{}
	for i, n := range names {
		n = strings.TrimSpace(n)
		names[i] = n
		if !isLabel(n) {
			return "", fmt.Errorf("group: %q is not a group name (a-z, 0-9 and '-', not at either end, 1 to 63 characters)", n)
		}
		if seen[n] {
			return "", fmt.Errorf("group: %q is listed twice", n)
		}
		seen[n] = true
	}
	return strings.Join(names, ","), nil
}

func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
