package api

// Error is every error body: {"error": "...", "detail": "..."}.
type Error struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}
