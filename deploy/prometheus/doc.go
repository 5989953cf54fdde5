// Package prometheus holds the Prometheus alert rules for scafo-node (scafo-rules.yml), their
// promtool unit tests (scafo-rules.test.yml), and queried-metrics.txt: every metric and label
// the rules and the Grafana dashboard (deploy/grafana/scafo.json) query, as Prometheus's own
// parser reads them. Its tests run promtool (promtool.sh builds it once); e2e's
// TestDashboardAndAlertsQueryOnlyWhatANodeExports checks that list against a running node.
package prometheus
