// The scafo status page. Plain script, no framework, no build step.
//
// Rules this file keeps:
//   - Every text that comes from the fleet (names, hosts, audit fields, error strings
//     from store objects) is inserted with document.createTextNode (through text(), the
//     one place that calls it), never as markup: there is no innerHTML, outerHTML,
//     insertAdjacentHTML or document.write in this file. text() also shows a
//     bidirectional control as a visible escape, so planted text cannot reorder a cell.
//   - The token lives in this tab's sessionStorage only, is sent only as an
//     Authorization: Bearer header to this node's own API, never in a URL or a cookie.
'use strict';

const TOKEN_KEY = 'scafo.token';
// /v1/status and the routing document are answered from the node's memory (status
// lists the ingress reports at most once a second, a view shared by every reader):
// they refresh every REFRESH_MS. /v1/apps and /v1/audit read the store (a list and
// one read per object): they refresh every SLOW_REFRESH_MS, and the page shows the
// last answer in between.
const REFRESH_MS = 3000;
const SLOW_REFRESH_MS = 30000;
const AUDIT_LIMIT = 20;

const $ = (id) => document.getElementById(id);

// BIDI are the bidirectional controls: the embeddings and overrides U+202A..U+202E, the
// isolates U+2066..U+2069, the marks U+200E, U+200F and U+061C. In a store object's text
// they would reorder what a cell shows ("exe.txt" that reads as "txt.exe"); text() shows
// each as its escape ("\u202e") instead. ui_test.go holds this list to the Go one.
const BIDI = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g;

// text is a text node of s, its bidirectional controls neutralised: every text the page
// shows is made here.
function text(s) {
  return document.createTextNode(String(s).replace(BIDI, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')));
}

// el builds an element; attrs are set as attributes (class, data-*, title), children
// are nodes or strings (strings become text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.appendChild(typeof c === 'string' || typeof c === 'number' ? text(c) : c);
  }
  return e;
}

function age(seconds) {
  if (seconds === undefined || seconds === null) return '';
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return s + 's';
  if (s < 7200) return Math.round(s / 60) + 'm';
  if (s < 172800) return Math.round(s / 3600) + 'h';
  return Math.round(s / 86400) + 'd';
}

function since(iso) {
  if (!iso) return undefined;
  return (Date.now() - Date.parse(iso)) / 1000;
}

function token() { return sessionStorage.getItem(TOKEN_KEY); }

// get reads path with the token: {status, body} (body null when not JSON).
async function get(path) {
  const resp = await fetch(path, {
    headers: { 'Authorization': 'Bearer ' + token(), 'Accept': 'application/json' },
    cache: 'no-store', credentials: 'omit', redirect: 'error', referrerPolicy: 'no-referrer',
  });
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  return { status: resp.status, body };
}

// adminOnly: the answer of a route the token may not read (placement, the audit log):
// 403 for the ingress token (its role named, nothing logged) and an application token.
const adminOnly = (status) => status === 401 || status === 403;

function showLogin(message) {
  $('main').hidden = true;
  $('forget').hidden = true;
  $('login').hidden = false;
  showError(message);
  $('token').focus();
}

function showError(message) {
  $('error').hidden = !message;
  $('error').replaceChildren(text(message || ''));
}

let timer = null;
let slow = null; // {at, apps, audit}: the last answers of the store-reading calls

async function refresh() {
  clearTimeout(timer);
  if (!token()) { showLogin(''); return; }
  try {
    const slowDue = !slow || Date.now() - slow.at >= SLOW_REFRESH_MS;
    const [status, routes, apps, audit] = await Promise.all([
      get('/v1/status'), get('/v1/ingress/routes'),
      slowDue ? get('/v1/apps') : slow.apps, slowDue ? get('/v1/audit?limit=' + AUDIT_LIMIT) : slow.audit,
    ]);
    // An answer other than 200 or a refusal for the token (a 429, a 5xx) is asked again
    // at the next refresh, not kept for the slow period.
    const keep = (r) => r.status === 200 || adminOnly(r.status);
    if (slowDue) slow = keep(apps) && keep(audit) ? { at: Date.now(), apps, audit } : null;
    if (status.status === 401 || routes.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      slow = null;
      showLogin('The node refused this token (401). Paste another.');
      return;
    }
    if (status.status !== 200 || !status.body) {
      throw new Error('GET /v1/status answered ' + status.status + (status.body && status.body.error ? ': ' + status.body.error : ''));
    }
    render(status.body, routes, apps, audit);
    showError('');
    $('login').hidden = true;
    $('main').hidden = false;
    $('forget').hidden = false;
    $('refreshed').replaceChildren(text('updated ' + new Date().toLocaleTimeString() + ', every ' + REFRESH_MS / 1000 + 's (placement and audit every ' + SLOW_REFRESH_MS / 1000 + 's)'));
    document.body.setAttribute('data-loaded', String(Date.now()));
  } catch (e) {
    showError('Refresh failed: ' + e.message);
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

function render(st, routes, apps, audit) {
  $('node-name').replaceChildren(text(st.node));
  // The node's own warnings first (what serves badly or not at all: an application with
  // no ready instance, an ingress behind or lost, no ingress at all), then the page's.
  const warnings = [...(st.warnings || [])];
  renderFleet(st, warnings);
  renderApps(st, routes, apps, warnings);
  renderIngresses(st, warnings);
  renderCertificates(st, warnings);
  renderAudit(audit);
  $('warnings').replaceChildren(...(warnings.length ? warnings.map((w) => el('li', {}, w)) : [el('li', { class: 'muted' }, 'none')]));
}

function renderFleet(st, warnings) {
  const store = st.store || {};
  const rev = st.revision ? st.revision + (st.revisionSince ? ', published ' + age(since(st.revisionSince)) + ' ago' : '') : 'none yet';
  $('fleet-summary').replaceChildren(el('ul', { class: 'plain' },
    el('li', {}, 'This node: ', el('b', {}, st.node), ' ', st.ready ? el('span', { class: 'ok' }, 'ready') : el('span', { class: 'bad' }, 'not ready')),
    el('li', {}, 'Published revision: ', el('code', { id: 'revision' }, rev)),
    el('li', { id: 'store', 'data-reachable': String(!!store.reachable) }, 'Store: ',
      store.reachable ? el('span', { class: 'ok' }, 'reachable') : el('span', { class: 'bad' }, 'unreachable'),
      store.foreign ? el('span', { class: 'bad' }, ' (foreign: nothing published from it)') : null),
    st.lastPass ? el('li', {}, 'Last reconcile pass: ' + age(since(st.lastPass)) + ' ago') : null,
  ));
  if (store.error) warnings.push('store: ' + store.error);
  if (store.heartbeatError) warnings.push('this node\'s record could not be written: ' + store.heartbeatError);
  if (store.foreignReason) warnings.push('foreign store: ' + store.foreignReason + (store.adopt ? ' (' + store.adopt + ')' : ''));
  if (st.servingRemembered) warnings.push('serving the document remembered in the state dir, not one derived from the store');
  if (st.duplicateName) warnings.push('duplicate node name: another live node writes ' + st.node + '\'s record from ' + st.duplicateName.address + ': ' + st.duplicateName.detail);
  const aw = st.addressWarning;
  if (aw && (aw.sharedWith || []).length) warnings.push('shared node.address ' + aw.address + ': also published by ' + aw.sharedWith.join(', ') + ': ' + aw.detail);
  if (aw && aw.loopback) warnings.push('node.address ' + aw.address + ' is a loopback or unspecified address in a fleet of ' + aw.liveNodes + ' live nodes: peers dialling it reach themselves');
  for (const m of st.mismatchedSettings || []) warnings.push('mismatched setting: ' + m);
  $('nodes').replaceChildren(...(st.nodes || []).map((n) => el('tr', { 'data-node': n.name, 'data-live': String(!n.stale) },
    el('td', {}, n.name), el('td', { class: 'mono' }, n.address),
    el('td', {}, n.stale ? el('span', { class: 'bad' }, 'stale') : el('span', { class: 'ok' }, 'live')),
    el('td', {}, age(n.ageSeconds)))));
  const groups = st.groups || [];
  $('groups').replaceChildren(groups.length ? el('p', { class: 'muted' }, 'Groups: ' + groups.map((g) => g.name + ' (' + g.routes + ' routes, ' + g.revision + ')').join(', ')) : '');
}

// renderApps: one row per application, from the routing document (hosts, upstreams in
// failover order: the ready ones) and, with the admin or read-only token, /v1/apps (placement:
// the placed nodes missing from the upstreams are not ready).
function renderApps(st, routes, apps, warnings) {
  const byApp = new Map();
  const entry = (name) => {
    if (!byApp.has(name)) byApp.set(name, { name, hosts: [], upstreams: null, paths: [], group: '', placement: null, passthrough: false });
    return byApp.get(name);
  };
  if (routes.status === 200 && routes.body) {
    for (const r of routes.body.routes || []) {
      const a = entry(r.application);
      a.hosts.push(r.host);
      if (a.upstreams === null) a.upstreams = r.upstreams || [];
      a.group = r.group || '';
      a.passthrough = a.passthrough || !!r.passthrough;
      for (const [prefix, target] of Object.entries(r.paths || {}).sort()) a.paths.push({ host: r.host, prefix, target });
    }
  } else {
    warnings.push('the routing document could not be read (' + routes.status + ')');
  }
  const live = new Set((st.nodes || []).filter((n) => !n.stale).map((n) => n.name));
  if (apps.status === 200 && apps.body) {
    for (const a of apps.body.apps || []) {
      const e = entry(a.name);
      e.placement = a.placement || [];
      if (a.ingress && a.ingress.group) e.group = a.ingress.group;
      for (const n of e.placement) {
        if (!live.has(n)) warnings.push('application ' + a.name + ': placement names node ' + n + ', which has no live record');
      }
    }
  } else if (adminOnly(apps.status)) {
    warnings.push('placement and the audit log need the read-only (or admin) token; this token reads status and routes only');
  } else {
    warnings.push('placement could not be read (' + apps.status + '): rows show the routing document only');
  }
  const rows = [...byApp.values()].sort((x, y) => x.name.localeCompare(y.name)).map((a) => {
    const ups = a.upstreams || [];
    const ready = new Set(ups.map((u) => u.node));
    const items = ups.map((u, i) => el('li', { 'data-node': u.node, 'data-ready': 'true' },
      (i + 1) + '. ' + u.node + ' ', el('span', { class: 'mono muted' }, u.address), ' ', el('span', { class: 'ok' }, 'ready')));
    for (const n of a.placement || []) {
      if (!ready.has(n)) items.push(el('li', { 'data-node': n, 'data-ready': 'false' }, n + ' ', el('span', { class: 'unready' }, 'not ready')));
    }
    if (!ups.length) items.push(el('li', { class: 'unready', 'data-none': 'true' }, 'no ready upstream: its hosts answer 503'));
    return el('tr', { 'data-app': a.name, 'data-ready': String(ups.length > 0) },
      el('td', {}, el('b', {}, a.name), a.passthrough ? el('div', { class: 'muted' }, 'TLS passthrough') : null),
      el('td', {}, a.group || 'default'),
      el('td', {}, el('ul', { class: 'plain' }, a.hosts.map((h) => el('li', { 'data-host': h, class: 'mono' }, h)))),
      el('td', {}, el('ul', { class: 'plain upstreams' }, items)),
      el('td', {}, el('ul', { class: 'plain paths' }, a.paths.map((p) => el('li', { 'data-host': p.host, 'data-prefix': p.prefix, class: 'mono' },
        p.host + '/' + p.prefix + ' → ' + p.target)))));
  });
  $('apps').replaceChildren(...rows);
  const skipped = st.skipped || [];
  $('skipped').replaceChildren(...(skipped.length ? skipped.map((s) => el('tr', { class: 'skipped' },
    el('td', { class: 'mono' }, s.object), el('td', {}, s.reason))) : [el('tr', {}, el('td', { class: 'muted' }, 'none'), el('td', {}))]));
}

function renderIngresses(st, warnings) {
  if (st.ingressesError) warnings.push('ingress reports could not be read: ' + st.ingressesError);
  for (const s of st.ingressesSkipped || []) warnings.push('ingress report ' + s.object + ': ' + s.reason);
  $('ingresses').replaceChildren(...(st.ingresses || []).map((i) => {
    const held = i.applied ? ['applied', i.applied] : i.served ? ['served', i.served] : ['nothing yet', null];
    return el('tr', { 'data-ingress': i.name, 'data-state': i.state },
      el('td', {}, el('b', {}, i.name)), el('td', {}, i.kind), el('td', {}, i.node), el('td', {}, i.groups || 'all'),
      el('td', {}, held[0] + (held[1] ? ' #' + held[1].serial : '')),
      el('td', { class: 'mono' }, held[1] && held[1].revision ? held[1].revision : ''),
      el('td', {}, i.behind ? el('span', { class: 'behind' }, String(i.behind)) : '0'),
      el('td', {}, age(i.ageSeconds) + ' ago'),
      el('td', {}, el('span', { class: i.state === 'current' ? 'ok' : i.state }, i.state)));
  }));
}

function renderCertificates(st, warnings) {
  const c = st.certificates;
  if (!c) {
    $('cert-summary').replaceChildren(el('p', { class: 'muted' }, 'Fleet certificates are off on this node (acme.enabled).'));
    $('certificates').replaceChildren();
    return;
  }
  $('cert-summary').replaceChildren(el('p', { class: 'muted' }, Object.entries(c.counts || {}).sort().map(([k, v]) => k + ': ' + v).join(', ')));
  $('certificates').replaceChildren(...(c.names || []).map((n) => {
    const days = n.notAfter ? Math.floor((Date.parse(n.notAfter) - Date.now()) / 86400000) : null;
    if (n.lastError) warnings.push('certificate ' + n.name + ': ' + n.lastError);
    const d = n.delegation;
    return el('tr', { 'data-cert': n.name, 'data-state': n.state },
      el('td', { class: 'mono' }, n.name), el('td', {}, n.state + (n.phase ? ' (' + n.phase + ')' : '')),
      el('td', {}, days === null ? '' : el('span', { class: days < 14 ? 'bad' : '' }, String(days))),
      el('td', {}, n.lastError ? el('span', { class: 'bad' }, 'failing: ' + n.lastError + (n.nextAttempt ? '; next attempt ' + new Date(n.nextAttempt).toLocaleString() : '')) : (n.attempts ? n.attempts + ' attempts' : '')),
      el('td', { class: 'mono' }, d ? d.cname + ' → ' + d.target + (d.inPlace ? ' (in place)' : ' (missing)') : ''));
  }));
}

function renderAudit(audit) {
  if (audit.status !== 200 || !audit.body) {
    $('audit').replaceChildren(el('tr', {}, el('td', { class: 'muted' }, adminOnly(audit.status) ? 'needs the read-only (or admin) token' : 'could not be read (' + audit.status + ')')));
    return;
  }
  $('audit').replaceChildren(...(audit.body.records || []).map((r) => el('tr', { class: 'audit' },
    el('td', {}, r.time ? new Date(r.time).toLocaleString() : ''), el('td', {}, r.actor), el('td', {}, r.node), el('td', {}, r.action),
    el('td', {}, r.account || ''), el('td', {}, r.app || ''), el('td', { class: 'mono' }, r.host || ''))));
}

document.addEventListener('DOMContentLoaded', () => {
  $('login').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('token').value.trim();
    $('token').value = '';
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    slow = null;
    refresh();
  });
  $('forget').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    slow = null;
    clearTimeout(timer);
    showLogin('');
  });
  refresh();
});
