package node

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// apiError is every error body: {"error": "...", "detail": "..."}.
type apiError struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

func writeError(w http.ResponseWriter, code int, msg, detail string) {
	writeJSON(w, code, apiError{Error: msg, Detail: detail})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := marshalObject(v)
	if err != nil {
		http.Error(w, `{"error":"internal","detail":"encoding response"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
	w.Write([]byte("\n"))
}

// marshalObject is the one JSON encoding for stored objects and responses: no HTML
// escaping, no trailing newline, map keys sorted (encoding/json), so equal values are
// equal bytes.
func marshalObject(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
