package node_test

import (
	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
)

// The whole-node harness (internal/testnode) and its node-free half (internal/nodetest),
// under the names this package's tests use.
type (
	testNode = testnode.Node
	served   = testnode.Served

	reportBackend = testnode.ReportBackend
)

const (
	testIngressToken = testnode.IngressToken
	testAdminToken   = testnode.AdminToken

	testProbeURL = testnode.ProbeURL
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
	serve              = testnode.Serve
	identical          = testnode.Identical
	openDir            = testnode.OpenDir
	fleetConfig        = testnode.FleetConfig
	serialOf           = testnode.SerialOf
	ingressesOf        = testnode.IngressesOf

	waitFor   = nodetest.WaitFor
	putObject = nodetest.Put
	putRaw    = nodetest.PutRaw

	startFakePlugin  = testnode.StartFakePlugin
	reportsConfig    = testnode.ReportsConfig
	onReportBackends = testnode.OnReportBackends
	startReportsNode = testnode.StartReportsNode
	listenOn         = testnode.ListenOn
	countedReports   = testnode.CountedReports
	costOf           = testnode.CostOf
	callbackOf       = testnode.CallbackOf
	apiNodes         = testnode.APINodes
	probeConfig      = testnode.ProbeConfig
	recordReady      = testnode.RecordReady
)
