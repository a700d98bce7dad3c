package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connhost/connhost/internal/buildinfo"
)

// MetricBuildInfo is the build-info metric (see newBuildInfoCollector).
const MetricBuildInfo = "connhost_build_info"

// newBuildInfoCollector reports connhost_build_info{version, commit,
// go_version, wazero_version, abi_version} 1: which build answers, for
// dashboards that join it to the other series and alerts on a fleet
// running mixed versions.
func newBuildInfoCollector(b buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricBuildInfo,
		Help: "Always 1; its labels say which connhost build this is.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "commit": b.Commit, "go_version": b.GoVersion,
			"wazero_version": b.WazeroVersion, "abi_version": strconv.Itoa(b.ABIVersion),
		},
	})
	g.Set(1)
	return g
}

// withVersion returns doc (the OpenAPI document) with
// info.x-connhost-version set to the build's version: info.version is the
// API's version, this one the server's. The zero Info leaves doc as it
// is.
func withVersion(doc []byte, b buildinfo.Info) []byte {
	if b.Version == "" {
		return doc
	}
	v, _ := json.Marshal(b.Short())
	const info = `"info": {`
	i := bytes.Index(doc, []byte(info))
	if i < 0 {
		return doc
	}
	at := i + len(info)
	out := append([]byte(nil), doc[:at]...)
	out = append(out, "\n    \"x-connhost-version\": "...)
	out = append(out, v...)
	out = append(out, ',')
	return append(out, doc[at:]...)
}
