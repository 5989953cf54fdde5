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

// DecodeStrict decodes exactly one JSON value from body into v, unknown fields
// refused. The error names the offending field where encoding/json knows it.
func DecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("field %q: want %s, got %s", te.Field, te.Type, te.Value)
		}
		if errors.Is(err, io.EOF) {
			return errors.New("empty body: want a JSON object")
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}
