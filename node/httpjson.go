package node

import (
	"net/http"

	"github.com/scafo/ingress/node/internal/jsonx"
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
	b, err := jsonx.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"internal","detail":"encoding response"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
	w.Write([]byte("\n"))
}
