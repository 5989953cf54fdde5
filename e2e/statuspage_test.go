package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The status page (/ui/) in a real browser: Debian's Chromium, headless, driven from Go
// by chromedp, against a two-node fleet and a real Traefik.

// chromiumPath is the browser the status page test drives: $SCAFO_CHROMIUM, or
// Debian's chromium (.ci/run installs it). Missing, the test skips, or fails under CI.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("SCAFO_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium unavailable under CI (%v): apt-get install -y chromium", err)
		}
		t.Skipf("chromium unavailable (%v): apt-get install -y chromium, or set SCAFO_CHROMIUM", err)
	}
	return path
}

// browser is one headless Chromium tab on a fresh profile.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	// exceptions are the page's uncaught script errors.
	exceptions []string
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", path, err)
	}
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.exceptions = append(b.exceptions, (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs actions, failing the test on an error.
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitDOM waits until the JavaScript expression is truthy in the page (polled on every
// DOM mutation and frame), and returns how long it took.
func (b *browser) waitDOM(t *testing.T, what, expr string, timeout time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout))); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting %s for the page to show %s (%s): %v\npage text:\n%s", timeout, what, expr, err, text)
	}
	return time.Since(t0)
}

func (b *browser) eval(t *testing.T, expr string) string {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// screenshot writes the page, whole, to dir/name.png.
func (b *browser) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	b.writeShot(t, dir, name, chromedp.FullScreenshot(100))
}

// screenshotOf writes the element css selects to dir/name.png.
func (b *browser) screenshotOf(t *testing.T, dir, name, css string) {
	t.Helper()
	b.writeShot(t, dir, name, chromedp.Screenshot(chromedp.CSS(css)))
}

func (b *browser) writeShot(t *testing.T, dir, name string, shot chromedp.Action[[]byte]) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, shot)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// screenshotDir is where the status page test writes its screenshots:
// $SCAFO_SCREENSHOTS, or e2e/results/statuspage (git-ignored).
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SCAFO_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join("results", "statuspage")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hostile is markup a store object carries into text the page shows: each would set
// window.__scafoXSS if it were ever parsed as HTML.
const (
	hostileImg    = `<img src=x onerror=window.__scafoXSS=1>`
	hostileScript = `<script>window.__scafoXSS=2</script>`
	hostileSVG    = `<svg onload=window.__scafoXSS=3>`
	// hostileBidi would show as "acme" and a reversed tail if its override were kept.
	hostileBidi = "acme\u202eevil"
)

// TestStatusPageShowsTheFleetLiveAndItsTextNeverRuns: the page a node serves at /ui/,
// in Chromium, with the admin token typed once: it lists the applications (hosts,
// upstreams in failover order, path maps) and the ingress; a flip made through the API,
// an instance going unready and the Traefik dying show on the page within seconds
// (waited on in the DOM); markup planted in the store (an unreadable claim's key, an
// audit record's fields) is shown as text and never runs; the token stays in the tab's
// sessionStorage (no cookie, no URL) until "Forget the token"; with the ingress token
// the page shows the fleet and says the audit log needs the read-only (or admin) token; and the
// public apex does not route /ui.
func TestStatusPageShowsTheFleetLiveAndItsTextNeverRuns(t *testing.T) {
	requireBinaries(t)
	chromiumPath(t)
	const readOnlyToken = "e2e0readonly0token00000000000000000000000000000000000000000000001"
	f := startFleet(t, 2, nodeOptions{args: append(ownPorts(), "--ingresses.lostAfter=3s", "--readonly.token="+readOnlyToken)})
	n1, n2 := f.nodes[0], f.nodes[1]
	f.deploy(t, "classic", "acme", []*node{n1}, "")
	f.deploy(t, "next", "acme", []*node{n1}, "")
	web := f.deploy(t, "web", "acme", []*node{n1, n2}, "")
	const host, target = "ti.example.org", "next.apps.localhost"
	n1.claim(t, "classic", host)
	tr := startTraefik(t, "traefik-ui", traefikOptions{node: n1, ingressName: "edge-ui"})
	tr.waitServedBy(t, host, "/", "classic@n1", routeTimeout)
	_ = web

	// The apex routes the node API but never the page, however it is spelled.
	if r, err := tr.get("apps.localhost", "/v1/healthz"); err != nil || r.status != http.StatusOK {
		t.Fatalf("apps.localhost/v1/healthz through Traefik: %v %v, want the node API's 200", r.status, err)
	}
	for _, p := range []string{"/ui/", "/ui", "/ui/app.js", "/ui/style.css", "/%75i/", "//ui/", "/x/../ui/"} {
		tr.expectTraefik404(t, "apps.localhost", p)
	}

	// Markup planted around the API: an unreadable claim whose key is markup (its skip
	// reason names it) and an audit record whose fields are.
	writeStoreObject(t, f, "domains/"+hostileImg+".json", "not json "+hostileScript)
	now := time.Now().UTC()
	if err := os.MkdirAll(filepath.Join(f.store, "audit", now.Format("20060102")), 0o700); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(map[string]any{"time": now, "actor": hostileSVG, "node": "n1", "action": hostileImg,
		"account": hostileBidi, "app": hostileScript, "host": hostileImg, "prefixes": 0})
	writeStoreObject(t, f, "audit/"+now.Format("20060102")+"/235959.999999999Z-e2e.json", string(rec))
	bumpSerialUnnamed(t, f)
	n1.waitSkipped(t, "domains/"+hostileImg+".json")

	b := startBrowser(t)
	shots := screenshotDir(t)
	b.do(t, "opening the page", chromedp.Navigate(n1.url("/ui/")), chromedp.WaitVisible(chromedp.ID("token")))
	b.screenshot(t, shots, "0-token")
	b.do(t, "typing the token", chromedp.SendKeys(chromedp.ID("token"), testAdminToken), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	// Any policy violation from here on is recorded (nothing on the page should trip one).
	b.eval(t, `window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI)); ''`)
	// The page's requests to the API from here on are counted (resource timing): item 4.
	b.eval(t, `window.__polls0 = performance.now(); performance.setResourceTimingBufferSize(10000); ''`)

	t0 := time.Now()
	b.waitDOM(t, "the fleet", `document.querySelectorAll('#nodes tr[data-live="true"]').length === 2`, 10*time.Second)
	loaded := time.Since(t0)
	b.waitDOM(t, "the applications and their hosts", `['classic', 'next', 'web'].every((a) => document.querySelector('#apps tr[data-app="'+a+'"]'))
		&& document.querySelector('#apps tr[data-app="classic"] li[data-host="ti.example.org"]')`, 10*time.Second)
	b.waitDOM(t, "web's upstreams n1 then n2, both ready",
		`Array.from(document.querySelectorAll('#apps tr[data-app="web"] li[data-ready="true"]')).map((e) => e.dataset.node).join() === 'n1,n2'`, 10*time.Second)
	b.waitDOM(t, "the ingress edge-ui, current", `document.querySelector('#ingresses tr[data-ingress="edge-ui"][data-state="current"]')`, 20*time.Second)
	b.screenshot(t, shots, "1-fleet")

	// Escaping: the planted markup is on the page as text, and no element of it exists.
	b.waitDOM(t, "the hostile claim's skip, as text", fmt.Sprintf(`document.getElementById('skipped').textContent.includes(%q)`, hostileImg), 10*time.Second)
	b.waitDOM(t, "the hostile audit record, as text", fmt.Sprintf(`document.getElementById('audit').textContent.includes(%q) && document.getElementById('audit').textContent.includes(%q)`,
		hostileScript, hostileSVG), 10*time.Second)
	// A bidirectional control shows as its escape, never as itself.
	b.waitDOM(t, "the planted override, escaped", `document.getElementById('audit').textContent.includes('acme\\u202eevil')
		&& !document.body.textContent.includes('\u202e')`, 10*time.Second)
	b.screenshot(t, shots, "2-hostile")

	// A flip through the API shows within seconds.
	n2.putPaths(t, "classic", host, map[string]string{"paulca": target})
	flip := b.waitDOM(t, "the flip ti.example.org/paulca → "+target,
		fmt.Sprintf(`(document.querySelector('#apps li[data-host="ti.example.org"][data-prefix="paulca"]') || {}).textContent === 'ti.example.org/paulca → %s'`, target), 10*time.Second)

	// web's n2 instance goes unready: n2 leaves the failover list and shows not ready.
	n2.setInstance(t, "web", web.on(n2).port, false)
	unready := b.waitDOM(t, "web's n2 not ready",
		`document.querySelector('#apps tr[data-app="web"] li[data-node="n2"][data-ready="false"]') && document.querySelectorAll('#apps tr[data-app="web"] li[data-ready="true"]').length === 1`, 15*time.Second)
	b.screenshot(t, shots, "3-application")
	b.screenshotOf(t, shots, "view-fleet", "#fleet")
	b.screenshotOf(t, shots, "view-applications", "#applications")

	// The Traefik dies: the page shows the ingress lost (lostAfter 3s).
	tr.proc.Kill()
	lost := b.waitDOM(t, "edge-ui lost", `document.querySelector('#ingresses tr[data-ingress="edge-ui"][data-state="lost"]')`, 20*time.Second)
	b.waitDOM(t, "edge-ui lost and no ingress among the warnings", `document.getElementById('warnings').textContent.includes('ingress edge-ui (polling n1) is lost')
		&& document.getElementById('warnings').textContent.includes('no ingress polls this fleet')`, 10*time.Second)
	b.screenshot(t, shots, "4-lost")

	if v := b.eval(t, `String(window.__scafoXSS)`); v != "undefined" {
		t.Errorf("window.__scafoXSS = %s: planted markup ran", v)
	}
	if n := b.eval(t, `String(document.querySelectorAll('main img, main script, main svg, main iframe').length)`); n != "0" {
		t.Errorf("%s elements built from fleet text, want 0", n)
	}
	if v := b.eval(t, `JSON.stringify(window.__csp)`); v != "[]" {
		t.Errorf("Content-Security-Policy violations: %s", v)
	}
	if v := b.eval(t, `sessionStorage.getItem('scafo.token') === '`+testAdminToken+`' ? 'kept' : 'missing'`); v != "kept" {
		t.Errorf("token in sessionStorage: %s", v)
	}
	if v := b.eval(t, `document.cookie + '|' + location.href + '|' + localStorage.length`); v != "|"+n1.url("/ui/")+"|0" {
		t.Errorf("cookie|url|localStorage = %q, want no cookie, the bare page URL, nothing stored", v)
	}

	polls := pagePolls(t, b)

	// "Forget the token" clears it; the ingress token reads the fleet, routes and
	// ingresses, and the page says what only the admin token reads.
	b.do(t, "forgetting the token", chromedp.Click(chromedp.ID("forget")), chromedp.WaitVisible(chromedp.ID("token")))
	if v := b.eval(t, `String(sessionStorage.getItem('scafo.token'))`); v != "null" {
		t.Errorf("after Forget, sessionStorage holds %q", v)
	}
	b.do(t, "typing the ingress token", chromedp.SendKeys(chromedp.ID("token"), testIngressToken), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	b.waitDOM(t, "the fleet with the ingress token, audit refused", `document.querySelector('#apps tr[data-app="classic"]') && document.querySelector('#ingresses tr[data-ingress="edge-ui"]')
		&& document.getElementById('audit').textContent === 'needs the read-only (or admin) token'`, 10*time.Second)
	b.screenshot(t, shots, "5-ingress-token")

	// The read-only token past its store-read budget on n1 (another holder keeps it
	// spent: a read every 10 ms against the refill of one a second): placement cannot
	// be read (429), and the page says so rather than showing rows without it. The
	// page may catch a refilled read now and then (a 200, kept for its slow period):
	// the wait spans a slow period.
	spent, stopSpending := make(chan struct{}), make(chan struct{})
	go func() {
		once := false
		for {
			select {
			case <-stopSpending:
				return
			case <-time.After(10 * time.Millisecond):
			}
			req, _ := http.NewRequest(http.MethodGet, n1.url("/v1/apps"), nil)
			req.Header.Set("Authorization", "Bearer "+readOnlyToken)
			resp, err := apiClient.Do(req)
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests && !once {
				once = true
				close(spent)
			}
		}
	}()
	select {
	case <-spent:
	case <-time.After(30 * time.Second):
		t.Fatal("reads of /v1/apps with the read-only token every 10 ms for 30 s: no 429")
	}
	b.do(t, "forgetting the token", chromedp.Click(chromedp.ID("forget")), chromedp.WaitVisible(chromedp.ID("token")))
	b.do(t, "typing the read-only token", chromedp.SendKeys(chromedp.ID("token"), readOnlyToken), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	b.waitDOM(t, "the fleet with the read-only token past its budget, placement refused", `document.querySelector('#apps tr[data-app="classic"]')
		&& document.getElementById('warnings').textContent.includes('placement could not be read (429)')`, 45*time.Second)
	close(stopSpending)
	b.screenshot(t, shots, "6-read-only-budget-spent")

	b.mu.Lock()
	if len(b.exceptions) > 0 {
		t.Errorf("uncaught script errors: %q", b.exceptions)
	}
	b.mu.Unlock()
	t.Logf("page loaded the fleet %s after the token; flip shown after %s, unready after %s, lost after %s (lostAfter 3s); screenshots in %s; %s",
		ms(loaded), ms(flip), ms(unready), ms(lost), shots, polls)
}

// pagePolls counts the API requests the page made since window.__polls0 (the browser's
// resource timing), checks them against the page's schedule (readPageSchedule: it polls on
// its own, never more often than REFRESH_MS and SLOW_REFRESH_MS say) and describes them as
// requests per minute.
func pagePolls(t *testing.T, b *browser) string {
	t.Helper()
	s := readPageSchedule(t)
	var got struct {
		Elapsed float64        `json:"elapsed"` // ms
		Paths   map[string]int `json:"paths"`
	}
	raw := b.eval(t, `JSON.stringify({elapsed: performance.now() - window.__polls0, paths: performance.getEntriesByType('resource')
		.filter((e) => e.startTime >= window.__polls0 && new URL(e.name).pathname.startsWith('/v1/'))
		.reduce((m, e) => { const p = new URL(e.name).pathname; m[p] = (m[p] || 0) + 1; return m; }, {})})`)
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("resource timing %q: %v", raw, err)
	}
	elapsed := time.Duration(got.Elapsed * float64(time.Millisecond))
	total := 0
	for p, n := range got.Paths {
		total += n
		every := s.refresh
		if p == "/v1/apps" || p == "/v1/audit" {
			every = s.slow
		}
		if max := int(elapsed/every) + 1; n > max {
			t.Errorf("the page asked %s %d times in %s: more than once every %s", p, n, ms(elapsed), every)
		}
	}
	if got.Paths["/v1/status"] < 2 {
		t.Errorf("the page asked /v1/status %d times in %s: it does not poll on its own", got.Paths["/v1/status"], ms(elapsed))
	}
	return fmt.Sprintf("the page made %d API requests in %s (%.0f a minute; %v; its schedule: %.0f a minute)",
		total, ms(elapsed), float64(total)*float64(time.Minute)/float64(elapsed), got.Paths, s.perMinute())
}
