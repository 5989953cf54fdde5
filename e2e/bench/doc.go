// Package bench measures scafo ingress side by side with its references (issue 8) and
// writes REPORT.md: poll throughput against nginx serving the same bytes, derive+render
// cost by fleet size, byte stability across nodes and restarts, and Traefik's side
// (throughput, startup, health-check load) for the configuration we render; and, for
// issue 13, flip latency by fleet size through a real Traefik with either provider
// (fleetflip_test.go) and store requests per node per tick on a real MinIO
// (storecost_test.go), both also on an older build for before/after ratios; for issue
// 17, flips in one ingress group of a grouped fleet through that group's Traefik, with
// other groups' Traefiks and pollers recording that nothing reached them
// (groups_test.go, also gated by SCAFO_BENCH_GROUPS=1, which run.sh sets).
//
// The pieces a later measurement reuses: fleetgen_test.go writes a routable generated
// fleet (a group per application optional) whose flip participants answer with their
// own name; providers_test.go starts a Traefik on the shipped static configuration of
// either provider kind, with any endpoint query (HTTP provider) or extra plugin setting.
//
// Everything heavy is in tests that run only with SCAFO_BENCH=1, so a plain
// `go test ./...` runs just the cheap unit tests of the harness. The one command is
//
//	e2e/bench/run.sh
//
// which builds scafo-node, resolves Traefik (e2e/build-traefik.sh), checks for wrk and
// nginx, runs the measurements in one go and writes e2e/bench/REPORT.md. Every
// comparison is a ratio of two figures taken in the same run on the same machine: the
// absolute numbers move with the machine's load, the ratios much less.
package bench
