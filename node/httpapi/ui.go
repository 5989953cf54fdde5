package httpapi

import (
	"embed"
	"net/http"
	"strings"

	"github.com/scafo/ingress/node/api"
)

// The status page (docs/operating.md, "The status page"): three static files embedded
// in the binary, served without a token because they hold no data. The script asks
// the operator for a token, keeps it in the tab's sessionStorage and reads the JSON API
// with it; everything it shows is inserted as text, never as markup.

//go:embed ui/index.html ui/app.js ui/style.css
var uiFiles embed.FS

// uiAssets maps the file names under api.PathUI to their content types; "" is the page.
var uiAssets = map[string]string{
	"":           "text/html; charset=utf-8",
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"style.css":  "text/css; charset=utf-8",
}

// UIContentSecurityPolicy is the status page's policy: its own script, style and
// API only; no inline script or style, no framing, no plugins, no form posts.
const UIContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// setUIHeaders sets the headers of every answer under /ui (pages, assets, 404s).
func setUIHeaders(h http.Header) {
	h.Set("Content-Security-Policy", UIContentSecurityPolicy)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// handleUIRoot redirects /ui to the page, so its relative asset links resolve.
func handleUIRoot(w http.ResponseWriter, r *http.Request) {
	setUIHeaders(w.Header())
	http.Redirect(w, r, api.PathUI, http.StatusMovedPermanently)
}

// handleUI serves the page and its assets.
func handleUI(w http.ResponseWriter, r *http.Request) {
	setUIHeaders(w.Header())
	name := strings.TrimPrefix(r.URL.Path, api.PathUI)
	ctype, ok := uiAssets[name]
	if !ok {
		writeError(w, http.StatusNotFound, "not found", r.URL.Path)
		return
	}
	if name == "" {
		name = "index.html"
	}
	b, err := uiFiles.ReadFile("ui/" + name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "reading the embedded "+name)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}
