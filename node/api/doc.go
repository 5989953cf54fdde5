// Package api is the node's HTTP API on the wire: the route paths, the header names,
// the routing formats, the error envelope and the JSON bodies of /v1/status and of a
// write made with ?wait=applied. The server, the command-line client and the tests
// share these declarations, so the three cannot drift apart.
//
// It imports only the standard library (and render/routing): a client of the API
// depends on nothing of the server.
package api
