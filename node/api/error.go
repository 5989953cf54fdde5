package api

// Error is every error body: {"error": "...", "detail": "..."}.
type Error struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
	// Role names the node's own token a 403 refused ("ingress", "read-only"): a known
	// credential that may not make the request (docs/security.md, Who can do what).
	Role string `json:"role,omitempty"`
}
