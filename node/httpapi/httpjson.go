package httpapi

import (
	"net/http"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/internal/jsonx"
)

func writeError(w http.ResponseWriter, code int, msg, detail string) {
	writeJSON(w, code, api.Error{Error: msg, Detail: detail})
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
