// Package e2e proves the machinery against a real Traefik: scafo-node processes built
// from this tree, upstream echo servers on distinct loopback addresses (127.0.0.2,
// 127.0.0.3, … stand in for the nodes of a fleet), and Traefik v3.6.12 polling a node
// with its HTTP provider, configured from deploy/traefik/traefik.yml itself.
//
// Everything lives in the tests; this file only documents the package.
//
//	go test -timeout 40m ./e2e/...
//
// TestMain builds scafo-node (go build ./node/cmd/scafo-node) and resolves Traefik with
// build-traefik.sh (cached under the user cache dir; TRAEFIK_BIN overrides; a cold build
// takes ~12 minutes on 2 cores, hence the timeout). When Traefik cannot be resolved the
// scenarios skip with the reason, except under CI (CI set), where they fail. -short skips
// the scenarios and keeps the fast checks of the shipped configuration.
//
// SCAFO_E2E_REPORT=1 writes the measured numbers (failed requests per failover switch,
// flip latency p50/p95, the flip-invariant corpus) to e2e/results/latest.md.
// SCAFO_E2E_TRAEFIK_LOG=DEBUG raises Traefik's log level (its log is printed on failure).
package e2e
