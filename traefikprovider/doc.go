// Package traefikprovider is a Traefik v3 provider plugin that reads the rendered
// dynamic configuration from a list of scafo nodes (GET /v1/ingress/traefik).
//
// It exists because Traefik's built-in HTTP provider polls one URL on a timer: if
// that node is down a freshly started Traefik has no routes, and every change waits
// for the next tick. This plugin:
//
//   - reads from one node at a time and sticks to the last one that answered; on a
//     connection error, timeout, 503 (draining), 401/403 or any other non-200/304
//     answer it moves to the next endpoint, round robin, and logs the switch;
//   - tries each endpoint once immediately after a failure; once all have failed in a
//     row it waits PollInterval between attempts and logs one summary line;
//   - long-polls (Watch, the default): once it holds a configuration it sends
//     If-None-Match with that ETag and ?wait=WatchWait, so the node answers the moment
//     its revision moves (200) or when the wait ends (304). The request deadline is
//     WatchWait + PollTimeout. Without Watch it polls every PollInterval, still with
//     If-None-Match;
//   - emits a configuration only when the ETag changed, and only after the whole body
//     arrived and parsed as a JSON object: a truncated or invalid body, like every
//     failure, emits nothing, so Traefik keeps the last good configuration. A node
//     that is unreachable never produces an empty configuration;
//   - when a node legitimately serves a configuration with no routes, emits it with
//     non-nil empty http.routers and http.services, because Traefik skips a
//     configuration whose maps are all nil and would otherwise keep the old routes;
//   - stops promptly: Stop cancels the request in flight and waits for the goroutine.
//
// Nodes answering for the same revision send the same ETag, so a switch between
// nodes that agree emits nothing.
//
// Order across nodes: a node sends, on every 200 and 304, the store serial its
// configuration was derived from (X-Scafo-Serial, and the store's X-Scafo-Epoch), in
// headers so bodies stay byte-identical across nodes. The plugin never emits a
// configuration derived from an older serial of the same epoch than one it emitted (or
// saw confirmed since, by a 304 or the same body at a later serial): after a switch to
// a node that is a tick behind, it keeps what it has, logs it once, and long-polls
// with both ETags in If-None-Match (for at most 2 s while behind), so the node answers
// as soon as it moves, or shows with a 304 at a later serial that its older body is
// current again (a change and its revert); a
// configuration at the same serial or later is emitted as usual. An answer without the
// header is a node that predates it (legacy): it is emitted as before, and the order
// starts again from the next answer that has one. Another epoch (a store an operator
// adopted) starts a new order. A node that stays behind (its store unreachable, say)
// keeps the plugin on what it has, as long as it answers.
//
// Reports (the node's ingress reports): every request names this ingress
// (X-Scafo-Ingress: Name, default the host name; X-Scafo-Ingress-Kind: plugin) and,
// once a configuration with a serial was handed to Traefik and AppliedDelay has passed
// (Traefik tells a provider nothing about applying it), the serial, epoch and revision
// of that configuration (X-Scafo-Applied-Serial, -Epoch, -Revision). After handing one
// over, the next poll waits AppliedDelay, so it carries the report. A write made with
// ?wait=applied answers once every live ingress reports its serial.
//
// The state file (StateFile): the last configuration applied is kept on disk (temp
// file, fsync, rename, mode 0600: with inline fleet certificates it holds private
// keys), replaced by every configuration applied, none of which is older in serial
// order (a new body at the same serial, a fleet certificate, replaces it). At start its
// serial seeds the order; its configuration is emitted only when the first round of
// polls fails, or when the first node that answers serves an older configuration: a
// Traefik restarted while no node answers routes from it instead of nothing.
//
// # Running under Traefik
//
// Traefik runs plugins in the Yaegi interpreter, so this package uses the standard
// library only and plain constructs (no generics). Traefik's loader reads the
// manifest .traefik.yml and the sources from
// ./plugins-local/src/github.com/scafo/ingress/traefikprovider/ (relative to
// Traefik's working directory); no go.mod is needed there. The package's import path
// in this repository and the plugin's module name are the same. Package localplugin
// lays the files out and loads them the way Traefik does; every behaviour test runs
// both compiled and under Yaegi, so CI fails on a construct Yaegi cannot run. Three
// such constructs were found and avoided (Yaegi v0.16.1): a send of a converted
// field in a select case ("case ch <- json.RawMessage(res.body):") sends nil, which
// Traefik would decode as an empty configuration and skip; and calling a variadic
// func-typed struct field fails when the package is imported. A third: a parallel
// assignment of struct values ("applied, pending = pending, appliedState{}") leaves
// the destination unchanged; struct state is assigned field by field.
//
// Logging: the log package (stderr) reaches Traefik's log at ERROR level, Traefik's
// default, and is used for endpoint switches and outages; fmt.Print (stdout) reaches
// it at DEBUG level and is used for routine events (each configuration emitted).
//
// The token: Traefik's static configuration file does not expand environment
// variables, and Traefik reads its static configuration from exactly one source
// (file, else flags, else TRAEFIK_* environment variables). When Token is empty the
// plugin reads the environment variable named by TokenEnv (SCAFO_INGRESS_TOKEN by
// default); Yaegi gives plugins Traefik's environment.
package traefikprovider
