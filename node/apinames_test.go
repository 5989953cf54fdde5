package node_test

import "github.com/scafo/ingress/node/httpapi"

// The HTTP API's budgets, sizes and refusal reasons (node/httpapi), under the names
// the node's tests use.
const (
	knownTokenRate  = httpapi.KnownTokenRate
	knownTokenBurst = httpapi.KnownTokenBurst
	sendfileMin     = httpapi.SendfileMin

	refusedWriteRate     = httpapi.RefusedWriteRate
	refusedToken         = httpapi.RefusedToken
	refusedTokenLookups  = httpapi.RefusedTokenLookups
	refusedConnReserve   = httpapi.RefusedConnReserve
	refusedConnPerSource = httpapi.RefusedConnPerSource
	refusedConnLimit     = httpapi.RefusedConnLimit
)

var refusalReasons = httpapi.RefusalReasons
