package node_test

import (
	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
)

// The whole-node harness (internal/testnode) and its node-free half (internal/nodetest),
// under the names this package's tests use.
type testNode = testnode.Node

const (
	testIngressToken = testnode.IngressToken
	testAdminToken   = testnode.AdminToken
)

var (
	testConfig         = testnode.Config
	startNode          = testnode.Start
	startNodeWithStore = testnode.StartWithStore
	startNodeOn        = testnode.StartOn
	seedFleet          = testnode.SeedFleet
	routesDoc          = testnode.RoutesDoc
	waitSeeded         = testnode.WaitSeeded
	hostsOf            = testnode.HostsOf
	issueToken         = testnode.IssueToken
	testAddress        = testnode.Address
	countConns         = testnode.CountConns

	waitFor   = nodetest.WaitFor
	putObject = nodetest.Put
	putRaw    = nodetest.PutRaw
)
