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
	pathsURL     = testnode.PathsURL
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
	serve              = testnode.Serve
	identical          = testnode.Identical
	statusOf           = testnode.StatusOf
	openDir            = testnode.OpenDir
	openS3             = testnode.OpenS3
	fleetConfig        = testnode.FleetConfig
	fleetOf            = testnode.FleetOf
	storeBytes         = testnode.StoreBytes
	raw                = testnode.Raw
	metricLine         = testnode.MetricLine
	statusMap          = testnode.StatusMap
	storedRecord       = testnode.StoredRecord
	readAnswer         = testnode.ReadAnswer
	dialFrom           = testnode.DialFrom
	serialOf           = testnode.SerialOf
	ingressesOf        = testnode.IngressesOf
	randHex            = testnode.RandHex
	upstreamNodes      = testnode.UpstreamNodes
	grepLines          = testnode.GrepLines
	pathsOf            = testnode.PathsOf
	upstreamsOf        = testnode.UpstreamsOf

	waitFor   = nodetest.WaitFor
	putObject = nodetest.Put
	putRaw    = nodetest.PutRaw

	connsHeld           = testnode.ConnsHeld
	connsOf             = testnode.ConnsOf
	rawRequest          = testnode.RawRequest
	closedWithin        = testnode.ClosedWithin
	startCountingTokens = testnode.StartCountingTokens
	startFakePlugin     = testnode.StartFakePlugin
	reportsConfig       = testnode.ReportsConfig
	onReportBackends    = testnode.OnReportBackends
	startReportsNode    = testnode.StartReportsNode
	listenOn            = testnode.ListenOn
	countedReports      = testnode.CountedReports
	costOf              = testnode.CostOf
	callbackOf          = testnode.CallbackOf
	apiNodes            = testnode.APINodes
	probeConfig         = testnode.ProbeConfig
	recordReady         = testnode.RecordReady
)
