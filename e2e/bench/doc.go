// Command bench measures scafo ingress side by side with its references and writes
// e2e/bench/REPORT.md (docs/performance.md reads it):
//
//	make report                          # every section, then the plots in docs/img
//	go run ./e2e/bench -only front       # one section (or several: -only poll,traefik)
//	go run ./e2e/bench -list             # the sections
//
// Issue 8: poll throughput against nginx serving the same bytes (poll), derive+render
// cost by fleet size (derive), byte stability across nodes and restarts (stability),
// and Traefik's side (throughput, startup, health-check load) for the configuration we
// render (traefik). Issue 13: flip latency by fleet size through a real Traefik with
// either provider (flip, fleetflip.go) and store requests per node per tick on a real
// MinIO (storecost), both also on an older build for before/after ratios (-before,
// built in a temporary git worktree). Issue 17: flips in one ingress group of a grouped
// fleet through that group's Traefik, with other groups' Traefiks and pollers recording
// that nothing reached them (groups). Issue 24: whether ?wait=applied is ever early
// (applied). Issue 47: the layer-4 front beside Traefik (front).
//
// A full run (about 50 minutes on 2 cores) writes the whole report; a run of some
// sections (-only, -skip) replaces just those sections and their goals in the report
// already there, each marked with when and how it was measured. Each measurement is a
// task (task.go): it ends at its first fatal error, stops the processes it started by
// their PID and removes its temporary directories; the program exits 1 if any
// measurement failed. Every comparison is a ratio of two figures taken in the same run
// on the same machine: the absolute numbers move with the machine's load, the ratios
// much less.
//
// Needs: Go, Traefik v3.6.12 (TRAEFIK_BIN, else built and cached by
// e2e/build-traefik.sh), wrk and nginx for poll and traefik (Debian: apt-get install -y
// wrk nginx-light; installed when missing and running as root), MinIO for storecost
// (.ci/minio.sh install), perf (optional: profiles of the node under load).
// SCAFO_NODE_BIN names a scafo-node to measure instead of building this tree's.
//
// Knobs (environment):
//
//	SCAFO_BENCH_ROUNDS=3        interleaved rounds per side of the poll comparison
//	SCAFO_BENCH_WRK="-t2 -c32 -d8s"   wrk load for every comparison (durations: poll 8s, Traefik 5s)
//	SCAFO_BENCH_PROFILE=0       no perf profiles of the node under load
//	SCAFO_BENCH_TRAEFIK_CASES="100 apps|10 000 apps"   only these Traefik cases
//	SCAFO_BENCH_FLIP_SIZES="100 1000 10000"   fleet sizes of the flip-latency rows
//	SCAFO_BENCH_FLIPS=20        flips per row (10 000 apps with the HTTP provider: ~8 s each)
//	SCAFO_BENCH_FLIP_ROUNDS=1   rounds of every flip row (2 on a quiet machine)
//	SCAFO_BENCH_FLIP_QUIET="10000"   sizes also measured with health checks at 1h ("" for none)
//	SCAFO_BENCH_BEFORE_SIZES="1000"  sizes of the flip rows on the older build
//	SCAFO_BENCH_STORE_NODES="3 6 12" SCAFO_BENCH_STORE_IDLE=60   storecost's fleets and idle window (s)
//	SCAFO_BENCH_GROUPS_APPS=10000 SCAFO_BENCH_GROUPS_N=10 SCAFO_BENCH_GROUPS_TRAEFIKS=3
//	                            the groups fleet, its groups and Traefiks (the flips' group +
//	                            observers); SCAFO_BENCH_FLIPS sets its flips too
//	SCAFO_BENCH_GROUPS_CONTROL=0   no flips through an every-group Traefik
//	SCAFO_BENCH_APPLIED_SIZES="1000 10000" SCAFO_BENCH_APPLIED_FLIPS=10   the applied rows
//
// The pieces a later measurement reuses: fleetgen.go writes a routable generated fleet
// (a group per application optional) whose flip participants answer with their own
// name; providers.go starts a Traefik on the shipped static configuration of either
// provider kind, with any endpoint query (HTTP provider) or extra plugin setting. The
// unit tests of these pieces (harness_test.go) need no binary and run in `make test`.
package main
