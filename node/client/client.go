// Package client is scafo-node's command-line client: the verbs (routes, ingresses, domains, apps)
// that talk to a running node's HTTP API with an admin or application token, built as
// paerser cli.Commands whose --help lists exactly the flags and arguments they accept.
package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/scafo/ingress/internal/peerowner"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/internal/statedir"
)

// Conn says which node to talk to and with which token; every verb takes it.
type Conn struct {
	URL      string `description:"Node API base URL; host:port alone is http://host:port (default: SCAFO_URL, else the node on this machine)." json:"url,omitempty"`
	Token    string `description:"Bearer token (default: SCAFO_TOKEN, SCAFO_ADMIN_TOKEN, then <stateDir>/admin-token)." json:"token,omitempty" loggable:"false"`
	StateDir string `description:"State directory to read the admin token from (default: SCAFO_STATEDIR, else the node's default)." json:"stateDir,omitempty"`
}

// SetDefaults sets the defaults: SCAFO_URL, else the node on this machine; SCAFO_STATEDIR
// (the variable the node itself reads), else the node's default state dir.
func (c *Conn) SetDefaults() {
	c.URL = "http://127.0.0.1:7400"
	if u := os.Getenv("SCAFO_URL"); u != "" {
		c.URL = u
	}
	c.StateDir = statedir.Default()
	if d := os.Getenv("SCAFO_STATEDIR"); d != "" {
		c.StateDir = d
	}
}

func (c *Conn) conn() *Conn { return c }

// Output is the --json switch of the verbs that print an object.
type Output struct {
	JSON bool `description:"Print JSON instead of aligned text." json:"json,omitempty"`
}

// nodeHTTPClient is the verbs' HTTP client. On a loopback address it sends nothing
// before checking who listens there (internal/peerowner): root (systemd holding
// scafo-node.socket), the node's user scafo, or the caller's own user. Any other
// owner is a process that took the node's port, and would receive the token
// (docs/security.md, "The node's port").
func nodeHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = peerowner.DialContext(peerowner.Trusted("scafo", os.Getuid()))
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

// client talks to a node's API.
type client struct {
	verb   string // "apps put": what its errors start with
	conn   Conn
	http   *http.Client
	out    io.Writer
	errOut io.Writer // warnings
}

// baseURL is --url as a base URL: a bare host:port is taken as http://host:port;
// anything but an http or https URL with a host is refused.
func baseURL(raw string) (string, error) {
	u := strings.TrimSpace(raw)
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return "", fmt.Errorf("--url %q: want http://host:port or https://host:port (a bare host:port is taken as http)", raw)
	}
	return strings.TrimSuffix(u, "/"), nil
}

// dial finds the token (flag, SCAFO_TOKEN, SCAFO_ADMIN_TOKEN, then the state dir's
// admin-token file) and returns a client writing to out.
func dial(verb string, conn Conn, out io.Writer) (*client, error) {
	base, err := baseURL(conn.URL)
	if err != nil {
		return nil, err
	}
	conn.URL = base
	if conn.Token == "" {
		conn.Token = os.Getenv("SCAFO_TOKEN")
	}
	if conn.Token == "" {
		conn.Token = os.Getenv("SCAFO_ADMIN_TOKEN")
	}
	if conn.Token == "" {
		b, err := os.ReadFile(filepath.Join(conn.StateDir, "admin-token"))
		if err != nil {
			return nil, fmt.Errorf("no token: pass --token, set SCAFO_TOKEN, or run where %s/admin-token is readable", conn.StateDir)
		}
		conn.Token = strings.TrimSpace(string(b))
	}
	return &client{verb: verb, conn: conn, http: nodeHTTPClient(), out: out, errOut: os.Stderr}, nil
}

// do sends a request and decodes a JSON answer into out (when non-nil). Error bodies
// become errors carrying the server's message.
func (c *client) do(method, path string, body io.Reader, out any) error {
	_, err := c.doWith(method, path, body, nil, out)
	return err
}

// doWith is do with extra request headers (If-Match), returning the answer's headers.
// Its errors carry their exit status (exit.go): a node that cannot be reached, or a
// 5xx, is ExitUnreachable (whether a write is in is not known); a 4xx, ExitRefused.
func (c *client) doWith(method, path string, body io.Reader, hdr http.Header, out any) (http.Header, error) {
	req, err := http.NewRequest(method, strings.TrimSuffix(c.conn.URL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Authorization", "Bearer "+c.conn.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, exitErrf(ExitUnreachable, "%s: cannot reach the node at %s (--url): %w", c.verb, c.conn.URL, unwrapURLError(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.Header, exitErrf(ExitUnreachable, "%s: reading the node's answer: %w", c.verb, err)
	}
	if resp.StatusCode >= 300 {
		code := ExitRefused
		if resp.StatusCode >= 500 {
			code = ExitUnreachable
		}
		// "apps put: invalid app: the body must be … (400 Bad Request)": the verb, the
		// node's words, the status; the API path is the node's business.
		var e api.Error
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg := e.Error
			if d := withoutStoreDetail(e.Detail); d != "" {
				msg += ": " + d
			}
			return resp.Header, exitErrf(code, "%s: %s (%s)", c.verb, msg, resp.Status)
		}
		return resp.Header, exitErrf(code, "%s: the node answered %s (%s %s)", c.verb, resp.Status, method, path)
	}
	if out != nil {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = b
			return resp.Header, nil
		}
		return resp.Header, json.Unmarshal(b, out)
	}
	return resp.Header, nil
}

// withoutStoreDetail cuts a node's error detail where the store's own words begin
// (`reading application shop: dir store: get "apps/shop.json": store: object not
// found` is "reading application shop"): where the node keeps an object is not the
// user's business.
func withoutStoreDetail(d string) string {
	for _, p := range []string{": dir store: ", ": s3 store: ", ": memory store: "} {
		if i := strings.Index(d, p); i >= 0 {
			return d[:i]
		}
	}
	return d
}

// unwrapURLError drops net/http's `Get "http://…/v1/…":` before a transport error.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c *client) printJSON(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	_, err := fmt.Fprintln(c.out, string(b))
	return err
}
