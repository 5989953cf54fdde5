// Package jsonx is the node's one JSON encoding and its one strict decoder.
// Marshal: no HTML escaping, map keys sorted, no trailing newline (equal values are
// equal bytes). DecodeStrict: unknown fields refused, one value only.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// Marshal encodes v for storage or a response.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeStrict decodes exactly one JSON value from body into v. Keys must match a
// field's JSON name exactly (encoding/json alone folds case, so {"PATHS":{}} or
// {"pathſ":{}} would fill "paths"), unknown fields and duplicate keys are refused
// (encoding/json alone keeps the last of two). The error names the offending field.
func DecodeStrict(body []byte, v any) error {
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// In JSON's words, never Go's ("cannot unmarshal array into Go value of
			// type fleet.App" is not for a user).
			if te.Field == "" {
				return fmt.Errorf("the body must be %s, got %s", jsonKind(te.Type), article(te.Value))
			}
			return fmt.Errorf("field %q: want %s, got %s", te.Field, jsonKind(te.Type), article(te.Value))
		}
		if errors.Is(err, io.EOF) {
			return errors.New("empty body: want a JSON object")
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	// Only whitespace may follow (dec.More alone misses a stray "]" or "}").
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// jsonKind names what a Go type decodes from, in JSON's words.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

// article puts "a" or "an" before encoding/json's name of a JSON value ("array",
// "string", "number -1", "bool").
func article(v string) string {
	switch {
	case v == "bool":
		return "a boolean"
	case strings.HasPrefix(v, "number"):
		return "a number (" + strings.TrimSpace(strings.TrimPrefix(v, "number")) + ")"
	case v != "" && strings.ContainsRune("aeiou", rune(v[0])):
		return "an " + v
	}
	return "a " + v
}

// checkKeys walks body's tokens beside type t: every object key must be unique in its
// object and, where t is a struct, exactly the JSON name of one of its fields.
// Malformed JSON is left to the decoder, which reports it better.
func checkKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := walk(dec, t, nil, 0)
	if errors.Is(err, errSyntax) {
		return nil // the decoder reports it (a truncated deep body is still refused above)
	}
	return err
}

var errSyntax = errors.New("syntax")

// MaxDepth bounds how deeply a request body may nest. No API body nests beyond three
// levels; without a bound, 2 MiB of "[[[[…" costs the decoders memory and CPU that
// grow with the square of the depth (and encoding/json's own limit is 10 000).
const MaxDepth = 32

// walk checks one value. path is the field path as segments, joined only for an error
// message: building it eagerly would copy a long key once per element below it.
func walk(dec *json.Decoder, t reflect.Type, path []string, depth int) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return errSyntax
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if depth >= MaxDepth {
		return fmt.Errorf("body nested deeper than %d levels at %q", MaxDepth, joinPath(path))
	}
	switch d {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, append(path[:len(path):len(path)], "["+strconv.Itoa(i)+"]"), depth+1); err != nil {
				return err
			}
		}
	case '{':
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = jsonFields(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errSyntax
			}
			k, _ := kt.(string)
			field := append(path[:len(path):len(path)], k)
			if seen[k] {
				return fmt.Errorf("field %q: duplicate key", joinPath(field))
			}
			seen[k] = true
			next := elem
			if fields != nil {
				ft, ok := fields[k]
				if !ok {
					return fmt.Errorf("unknown field %q (keys match exactly, case included)", joinPath(field))
				}
				next = ft
			}
			if err := walk(dec, next, field, depth+1); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return errSyntax
	}
	return nil
}

// jsonFields maps the exact JSON names of t's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// joinPath spells a field path for an error: a.b[2].c, each segment cut at 64 bytes.
func joinPath(path []string) string {
	var b strings.Builder
	for i, seg := range path {
		if len(seg) > 64 {
			seg = seg[:64] + "…"
		}
		if i > 0 && !strings.HasPrefix(seg, "[") {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
