package routing

import (
	"strconv"
	"strings"
)

// Middlewares by reference (Route.Middlewares, docs/design.md §2): an application lists,
// in order, Traefik middlewares the operator defined in their own ingresses' providers
// ("auth@file"); the fleet references them and defines none.

// Limits of a middleware list.
const (
	// MaxMiddlewares is the most middlewares one application lists.
	MaxMiddlewares = 32
	// MaxMiddlewareLen is the longest middleware reference, "name@provider", in bytes.
	MaxMiddlewareLen = 128
	// FleetProvider is the provider namespace of Traefik's HTTP provider, where the
	// render's own routers, services and middlewares live: no operator middleware is
	// defined there, so a reference to it is refused.
	FleetProvider = "http"
)

// ValidateMiddleware checks one middleware reference: "name@provider", the name
// [A-Za-z0-9][A-Za-z0-9._-]* and the provider [a-z0-9][a-z0-9-]* (Traefik's provider
// names: file, docker, kubernetescrd, plugin-<name>, …), at most MaxMiddlewareLen
// bytes in all, never in the fleet's own provider (FleetProvider). The provider is
// required: a router of the render's (provider http) naming "auth" alone would mean
// "auth@http", which does not exist.
func ValidateMiddleware(field, s string) error {
	return fieldErr(field, s, middlewareRule(s))
}

// ValidateMiddlewares checks an application's list: at most MaxMiddlewares, each one
// valid (ValidateMiddleware), none twice. An entry's error names it as field[i].
func ValidateMiddlewares(field string, list []string) error {
	if len(list) > MaxMiddlewares {
		return &FieldError{Field: field, Value: strconv.Itoa(len(list)) + " middlewares",
			Rule: "at most " + strconv.Itoa(MaxMiddlewares)}
	}
	if middlewaresRule(list) == "" {
		return nil
	}
	for i, m := range list {
		f := field + "[" + strconv.Itoa(i) + "]"
		if err := ValidateMiddleware(f, m); err != nil {
			return err
		}
		for j := range i {
			if list[j] == m {
				return &FieldError{Field: f, Value: m, Rule: "listed twice (as " + field + "[" + strconv.Itoa(j) + "])"}
			}
		}
	}
	return nil
}

// middlewaresRule is "" when ValidateMiddlewares accepts list, without naming
// anything (the render checks every route with it).
func middlewaresRule(list []string) string {
	if len(list) > MaxMiddlewares {
		return "too many"
	}
	for i, m := range list {
		if r := middlewareRule(m); r != "" {
			return r
		}
		for j := range i {
			if list[j] == m {
				return "listed twice"
			}
		}
	}
	return ""
}

func middlewareRule(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxMiddlewareLen {
		return "must be at most " + strconv.Itoa(MaxMiddlewareLen) + " bytes"
	}
	name, provider, ok := strings.Cut(s, "@")
	switch {
	case !ok:
		return "must be name@provider (e.g. auth@file): the provider that defines it is required"
	case name == "":
		return "the name before '@' must not be empty"
	case provider == "":
		return "the provider after '@' must not be empty"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return "the name may contain only A-Z, a-z, 0-9, '.', '_' and '-', and starts with a letter or digit"
		}
	}
	for i := 0; i < len(provider); i++ {
		c := provider[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0:
		default:
			return "the provider may contain only a-z, 0-9 and '-', and starts with a letter or digit"
		}
	}
	if provider == FleetProvider {
		return "provider http is the fleet's own (the render's routers and services): define the middleware in a provider of your own (file, docker, …)"
	}
	return ""
}
