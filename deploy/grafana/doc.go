// Package grafana holds the Grafana dashboard for scafo-node's metrics (scafo.json); its test
// checks the dashboard's structure. deploy/prometheus's tests parse its queries with
// Prometheus's parser, and e2e's TestDashboardAndAlertsQueryOnlyWhatANodeExports checks every
// metric they select against a running node.
package grafana
