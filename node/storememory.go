package node

import "github.com/scafo/ingress/node/reconcile"

// StoreMemory is what a node's state dir remembers of its store (served.json).
type StoreMemory = reconcile.StoreMemory

// RememberedStore reads what the node whose state dir is stateDir remembers of its
// store; ok is false when it remembers nothing.
func RememberedStore(stateDir string) (m StoreMemory, ok bool, err error) {
	return reconcile.RememberedStore(stateDir)
}

// RequestStoreAdopt asks the node whose state dir is stateDir to accept its store as it
// is (`scafo-node store adopt`): a running node does so at its next reconcile pass, a
// stopped one when it starts. The request is consumed once acted on; when the store is
// the one the node serves, it is dropped (there is nothing to adopt).
func RequestStoreAdopt(stateDir string) error { return reconcile.RequestStoreAdopt(stateDir) }
