// Package node is scafo-node: it folds the fleet's state from the store into the
// routing document, publishes it and its Traefik rendering over HTTP, and adapts the
// write API to the write domain (package fleetwrite).
//
// Shape: one reconcile goroutine builds immutable snapshots and swaps them in
// atomically; handlers are thin and read the current snapshot; rendered bodies are
// cached per (revision, prefer, format), so a poll is a map lookup and a write.
//
// This package is the composition root. The subsystems are packages of their own, each
// owning its state: node/reconcile (the loop, the only caller of Publish), node/publish
// (snapshots and rendered bodies), node/ingress (the ingress report book), node/self
// (this node's own record), node/probe, node/fleetcerts and the write domain
// node/fleetwrite. node/httpapi is the HTTP API over them (its one route table,
// handlers, guards); node/api is its wire. Here: the configuration (config.go,
// load.go), the object graph (wire.go), the lifetimes (server.go: start and stop
// order, the spill directory, shutdown), the metrics registry and the store's request
// counter.
//
// Until the first complete reconcile pass there is no document: the routing endpoints
// answer 503 "draining" with Retry-After, never an empty document, because an empty 200
// tells every ingress to withdraw every route. After that, a failed or partial store
// read changes nothing: the last good document keeps being served.
package node
