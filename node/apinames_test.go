package node_test

import "github.com/scafo/ingress/node/httpapi"

// sendfileMin is the body size from which node/httpapi serves a spill file.
const sendfileMin = httpapi.SendfileMin
