package traefikprovider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The applied probe (Config.AppliedProbe). Traefik tells a provider nothing about what
// it did with a configuration: the plugin hands one over on a channel, and Traefik
// throttles it (providersThrottleDuration), merges it with the other providers' and
// builds every router and service before the new handlers serve (1.5–2 s at 10 000
// applications on a 2-core machine). A fixed AppliedDelay is a guess that is early on
// a large configuration. The probe observes instead: each configuration handed over
// carries one router of the plugin's own,
//
//	scafo-applied-probe: Host(`scafo-applied.invalid`) && Path(`/<nonce>/<gen>`) → noop@internal
//
// where nonce is random per start and gen counts the configurations handed over, and
// the plugin asks this Traefik's entrypoint for that path. Traefik's noop@internal
// answers 418; before the configuration serves, nothing (or an older probe path)
// matches and the answer is something else. Traefik swaps the routers of every
// entrypoint in one pass over one built configuration, so once the probe's router
// answers, the application routers of that configuration are the ones serving (the
// other entrypoints are switched in the same loop, microseconds apart).
//
// The router's host is under .invalid (RFC 6761: never a real name; a claim under it
// is refused by routing.ValidateCustomHost in the write, the derivation and the decode,
// so no tenant route answers for it) and its path holds the nonce, so an outside client
// cannot find it; it only ever answers 418 with no body.

const (
	probeRouter = "scafo-applied-probe"
	probeHost   = "scafo-applied.invalid"
	// probeEvery is the time between probes while a configuration is pending.
	probeEvery = 50 * time.Millisecond
	// probeWarnAfter: a configuration the probe has not seen serving after this long
	// is logged once (a probe URL that does not reach an entrypoint, a redirection or
	// an entrypoint middleware in the way): it is never reported applied on a guess.
	probeWarnAfter = 15 * time.Second
	// probePriority puts the probe router above any router of the node's (and above
	// Traefik's entrypoint redirections, MaxInt32-1): its host is its own anyway.
	probePriority = 2147483647
)

// parseProbe validates Config.AppliedProbe: "" or an http(s) base URL with a host and
// no path, query, credentials or fragment.
func parseProbe(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("appliedProbe %q: not a URL: %w", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("appliedProbe %q: scheme must be http or https", raw)
	case u.Host == "":
		return "", fmt.Errorf("appliedProbe %q: no host (want the address of one of this Traefik's entrypoints, e.g. http://127.0.0.1:80)", raw)
	case u.User != nil:
		return "", fmt.Errorf("appliedProbe %q: credentials in the URL are not supported", raw)
	case strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("appliedProbe %q: want a base URL (scheme and host only)", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

// prober is the probe's state for one start of the provider.
type prober struct {
	base   string // entrypoint base URL
	nonce  string
	client *http.Client
}

func newProber(base string) (*prober, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("appliedProbe: no randomness for the probe path: %w", err)
	}
	return &prober{
		base:  base,
		nonce: hex.EncodeToString(b),
		client: &http.Client{
			Timeout: time.Second,
			// A redirection is an answer (not 418): never followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

func (pr *prober) path(gen uint64) string {
	return "/" + pr.nonce + "/" + strconv.FormatUint(gen, 10)
}

// withRouter returns body (the node's configuration, a JSON object) with the probe
// router for gen added under http.routers; the node's own members are kept byte for
// byte (json.RawMessage), only the enclosing objects are re-encoded.
func (pr *prober) withRouter(body []byte, gen uint64) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("the configuration is not a JSON object: %w", err)
	}
	httpSec := map[string]json.RawMessage{}
	if raw, ok := top["http"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &httpSec); err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
	}
	routers := map[string]json.RawMessage{}
	if raw, ok := httpSec["routers"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &routers); err != nil {
			return nil, fmt.Errorf("http.routers: %w", err)
		}
	}
	if _, taken := routers[probeRouter]; taken {
		return nil, errors.New("http.routers already holds " + probeRouter)
	}
	rule := "Host(`" + probeHost + "`) && Path(`" + pr.path(gen) + "`)"
	r, err := json.Marshal(map[string]interface{}{"rule": rule, "service": "noop@internal", "priority": probePriority})
	if err != nil {
		return nil, err
	}
	// One plain statement each: Yaegi v0.16.1 drops "m[k], err = f()".
	routers[probeRouter] = r
	rb, err := json.Marshal(routers)
	if err != nil {
		return nil, err
	}
	httpSec["routers"] = rb
	hb, err := json.Marshal(httpSec)
	if err != nil {
		return nil, err
	}
	top["http"] = hb
	return json.Marshal(top)
}

// serving asks the entrypoint whether the configuration gen is the one serving: true
// on noop's 418. The status is returned for the log when it is not.
func (pr *prober) serving(ctx context.Context, gen uint64) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pr.base+pr.path(gen), nil)
	if err != nil {
		return false, err.Error()
	}
	req.Host = probeHost
	resp, err := pr.client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusTeapot {
		return true, ""
	}
	return false, resp.Status
}
