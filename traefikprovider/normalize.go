package traefikprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// sections lists, per top-level key, the maps whose presence makes Traefik treat a
// configuration as non-empty (pkg/server/configurationwatcher.go, isEmptyConfiguration).
// A configuration with none of them is dropped by Traefik ("Skipping empty
// configuration"), which would leave the previous routes in place.
var sections = map[string][]string{
	"http": {"routers", "services", "middlewares"},
	"tcp":  {"routers", "services", "middlewares"},
	"udp":  {"routers", "services"},
	"tls":  {"certificates", "stores", "options"},
}

// checkConfiguration validates a 200 body and returns the bytes to emit.
//
// The body must be one complete JSON object: anything else (truncated, an array,
// null) is an error and is never emitted. A valid object that Traefik would consider
// empty is the node saying "no routes": it is returned with http.routers and
// http.services set to empty objects, so that Traefik applies it and withdraws the
// routes instead of skipping it. Any other body is returned unchanged.
func checkConfiguration(body []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, errors.New("empty body")
	}
	if trimmed[0] != '{' {
		return nil, errors.New("body is not a JSON object")
	}

	var top map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &top); err != nil {
		return nil, fmt.Errorf("body is not valid JSON: %w", err)
	}

	empty, err := traefikEmpty(top)
	if err != nil {
		return nil, err
	}
	if !empty {
		return body, nil
	}

	var httpSection map[string]json.RawMessage
	if raw, ok := top["http"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &httpSection); err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
	}
	if httpSection == nil {
		httpSection = map[string]json.RawMessage{}
	}
	httpSection["routers"] = json.RawMessage("{}")
	httpSection["services"] = json.RawMessage("{}")

	rawHTTP, err := json.Marshal(httpSection)
	if err != nil {
		return nil, fmt.Errorf("encoding http: %w", err)
	}
	top["http"] = rawHTTP

	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("encoding configuration: %w", err)
	}
	return out, nil
}

// traefikEmpty reports whether Traefik would skip this configuration as empty.
func traefikEmpty(top map[string]json.RawMessage) (bool, error) {
	for _, name := range []string{"http", "tcp", "udp", "tls"} {
		raw, ok := top[name]
		if !ok || isNull(raw) {
			continue
		}
		var section map[string]json.RawMessage
		if err := json.Unmarshal(raw, &section); err != nil {
			return false, fmt.Errorf("%s: not a JSON object: %w", name, err)
		}
		for _, key := range sections[name] {
			if v, ok := section[key]; ok && !isNull(v) {
				return false, nil
			}
		}
	}
	return true, nil
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
