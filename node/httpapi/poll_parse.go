package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/ingress"
	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

// pollRequest is a poll's inputs, each parsed once (parsePoll).
type pollRequest struct {
	format string        // api.FormatRoutes or api.FormatTraefik
	wait   time.Duration // ?wait=, at most maxWait (0: answer at once)
	groups []string      // ?group=, canonical (nil: every group)
	prefer string        // ?prefer=, "self" resolved ("": none)
	// report is the ingress report the headers carry (nil: none, or the admin's poll,
	// which is never one); reportErr says why the headers were refused instead (the
	// poll is still served: a report never changes routing).
	report    *ingress.Report
	reportErr error
	// probe is an HTTP-provider Traefik's applied probe (nil: none); its MAC is the
	// handler's to set.
	probe *publish.Probe
}

// pollError is a poll refused before it is served: its status (400, or 404 for an
// unknown format) and the JSON error naming the field at fault.
type pollError struct {
	code          int
	error, detail string
}

func badPoll(what string, err error) *pollError {
	return &pollError{code: http.StatusBadRequest, error: what, detail: err.Error()}
}

// parsePoll reads every input of a poll of format (the path's {format}): the applied
// probe header, the format, the query (wait, group, prefer; "self" is nodeName) and the
// report headers. admin: the poll carries the admin token (not an ingress: no report,
// no probe).
func parsePoll(r *http.Request, format, nodeName string, admin bool) (pollRequest, *pollError) {
	p := pollRequest{format: format}
	var rep ingress.Report
	var repErr error
	if r.Header.Get(api.HeaderIngress) != "" {
		rep, repErr = parseReport(r.Header)
	}
	probe, err := parseAppliedProbe(r, format, admin, rep, repErr)
	if err != nil {
		return p, badPoll("invalid applied probe", err)
	}
	p.probe = probe
	if format != api.FormatRoutes && format != api.FormatTraefik {
		return p, &pollError{code: http.StatusNotFound, error: "unknown format",
			detail: fmt.Sprintf("format %q is not registered; only %q", format, api.FormatTraefik)}
	}
	// r.URL.Query() drops a pair it cannot parse: ?group=eu-1;x would serve every group.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return p, badPoll("invalid query", err)
	}
	// A parameter given twice is refused, never the first one taken silently.
	for _, k := range []string{"wait", "prefer"} {
		if len(q[k]) > 1 {
			return p, badPoll("invalid "+k, fmt.Errorf("%s: given %d times", k, len(q[k])))
		}
	}
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return p, badPoll("invalid wait", fmt.Errorf("wait %q: must be a non-negative Go duration such as 30s", v))
		}
		p.wait = min(d, maxWait)
	}
	if vals, present := q["group"]; present {
		if len(vals) != 1 {
			return p, badPoll("invalid group", fmt.Errorf("group: give one group parameter, its names separated by commas (group=eu-1,eu-2)"))
		}
		if p.groups, err = routing.ParseGroups(vals[0]); err != nil {
			return p, badPoll("invalid group", err)
		}
	}
	prefer := q.Get("prefer")
	if _, given := q["prefer"]; given && prefer == "" {
		// "?prefer=" is malformed, not "no preference" (that is leaving it out).
		return p, badPoll("invalid prefer", fmt.Errorf("prefer: empty (a node name or self; leave the parameter out for none)"))
	}
	if prefer == "self" {
		prefer = nodeName
	}
	if prefer != "" {
		if err := routing.ValidateLabel("prefer", prefer); err != nil {
			return p, badPoll("invalid prefer", err)
		}
	}
	p.prefer = prefer
	if r.Header.Get(api.HeaderIngress) != "" && !admin {
		if repErr != nil {
			p.reportErr = repErr
		} else {
			// Its revision is its selection's: a write elsewhere moves no byte it serves.
			rep.Groups = strings.Join(p.groups, ",")
			p.report = &rep
		}
	}
	return p, nil
}

// parseAppliedProbe reads a poll's applied probe (docs/design.md §11): nil without the
// header; an error naming the field when it is malformed or cannot apply. rep and
// repErr are the poll's report headers, parsed.
func parseAppliedProbe(r *http.Request, format string, admin bool, rep ingress.Report, repErr error) (*publish.Probe, error) {
	vals := r.Header.Values(api.HeaderAppliedProbe)
	if len(vals) == 0 {
		return nil, nil
	}
	if len(vals) > 1 {
		return nil, fmt.Errorf("%s: given %d times", api.HeaderAppliedProbe, len(vals))
	}
	ep, err := render.ValidateBaseURL(vals[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %v", api.HeaderAppliedProbe, err)
	}
	switch {
	case admin:
		return nil, fmt.Errorf("%s: the admin token is not an ingress", api.HeaderAppliedProbe)
	case format != api.FormatTraefik:
		return nil, fmt.Errorf("%s: only on %s%s", api.HeaderAppliedProbe, api.PathIngress, api.FormatTraefik)
	case r.Header.Get(api.HeaderIngress) == "":
		return nil, fmt.Errorf("%s: needs %s (the ingress it reports for)", api.HeaderAppliedProbe, api.HeaderIngress)
	case ingress.Applies(r.Header.Get(api.HeaderIngressKind)):
		return nil, fmt.Errorf("%s: the plugin and the front report what they applied; only an HTTP-provider Traefik declares it", api.HeaderAppliedProbe)
	case repErr != nil:
		return nil, repErr
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// The callback goes where this poll came: the node as that Traefik reaches it.
	node, err := render.ValidateBaseURL(scheme + "://" + r.Host)
	if err != nil {
		return nil, fmt.Errorf("Host: %v", err)
	}
	return &publish.Probe{Ingress: rep.Name, EntryPoint: ep, Node: node}, nil
}

// parseReport reads a poll's report headers (docs/design.md §11); ingress.ParseReport
// validates them, every error naming the header.
func parseReport(h http.Header) (ingress.Report, error) {
	return ingress.ParseReport(ingress.ReportHeaders{
		Name: h.Get(api.HeaderIngress), Kind: h.Get(api.HeaderIngressKind),
		AppliedSerial: h.Get(api.HeaderAppliedSerial), AppliedEpoch: h.Get(api.HeaderAppliedEpoch),
		AppliedRevision: h.Get(api.HeaderAppliedRevision),
		Probe:           h.Get(api.HeaderAppliedProbe) != "",
	})
}
