// Command grafana-dashboard generates dist/grafana/cpushield.json, the Grafana dashboard
// for the metrics `cpushield agent` serves, with the typed builders of the Grafana
// Foundation SDK (no hand-written JSON). It prints the dashboard on stdout:
//
//	go run . > ../../dist/grafana/cpushield.json
//
// The test of this module checks that the file in dist/ is what this program generates;
// crates/cli/tests/agent_host.rs checks every panel's PromQL against a live agent and a
// real Prometheus.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The dashboard's template variables: the Prometheus data source and the nodes (agents).
const (
	datasourceVar = "datasource"
	instanceVar   = "instance"
)

// sel is the label matcher every query carries: the agents of the chosen nodes.
const sel = `job="cpushield", instance=~"$instance"`

// prom is the data source every panel and variable queries.
func prom() common.DataSourceRef {
	t, uid := "prometheus", "${"+datasourceVar+"}"
	return common.DataSourceRef{Type: &t, Uid: &uid}
}

// query is one PromQL target.
func query(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		RefId(ref).
		Datasource(prom()).
		Expr(expr).
		LegendFormat(legend)
}

// shieldUp is the "shield up" stat, one value per node: 1 when the agent's shield has a
// CPU of any kind, 0 when it has none.
func shieldUp() cog.Builder[dashboard.Panel] {
	up, down := "UP", "DOWN"
	green, red := "green", "red"
	mapping := dashboard.ValueMapOrRangeMapOrRegexMapOrSpecialValueMap{
		ValueMap: &dashboard.ValueMap{
			Type: dashboard.MappingTypeValueToText,
			Options: map[string]dashboard.ValueMappingResult{
				"1": {Text: &up, Color: &green},
				"0": {Text: &down, Color: &red},
			},
		},
	}
	return stat.NewPanelBuilder().
		Id(2).
		Title("Shield up").
		Description("Per node: whether the shield the agent keeps has a CPU (cpushield_shield_cpus > 0).").
		Datasource(prom()).
		Height(4).Span(8).
		ColorMode(common.BigValueColorModeBackground).
		Mappings([]dashboard.ValueMapping{mapping}).
		WithTarget(query("A",
			`max by (instance) (cpushield_shield_cpus{`+sel+`}) > bool 0`,
			"{{instance}}").Instant())
}

// shieldCpus is the number of CPUs shielded per kind.
func shieldCpus() cog.Builder[dashboard.Panel] {
	return stat.NewPanelBuilder().
		Id(3).
		Title("Shielded CPUs").
		Description("How many CPUs are shielded from processes, interrupts and the local timer (cpushield_shield_cpus).").
		Datasource(prom()).
		Height(4).Span(8).
		WithTarget(query("A",
			`cpushield_shield_cpus{`+sel+`}`,
			"{{instance}} {{kind}}").Instant())
}

// podTasks is the number of Kubernetes pod tasks that can run on a CPU shielded from processes.
func podTasks() cog.Builder[dashboard.Panel] {
	return stat.NewPanelBuilder().
		Id(4).
		Title("Pod tasks on the shield").
		Description("Tasks of Kubernetes pods whose affinity reaches a CPU shielded from processes: only the kubelet can move them (docs/fleet.md).").
		Datasource(prom()).
		Height(4).Span(8).
		WithTarget(query("A",
			`cpushield_pod_tasks_on_shield{`+sel+`}`,
			"{{instance}}").Instant())
}

// perSecond is a time series of per-second rates.
func perSecond(id uint32, title, description, unit string, targets ...*prometheus.DataqueryBuilder) cog.Builder[dashboard.Panel] {
	p := timeseries.NewPanelBuilder().
		Id(id).
		Title(title).
		Description(description).
		Datasource(prom()).
		Unit(unit).
		Min(0).
		Height(8).Span(12)
	for _, t := range targets {
		p.WithTarget(t)
	}
	return p
}

// latencyHeatmap is the agent probe's latency histogram as a heatmap of its buckets.
func latencyHeatmap() cog.Builder[dashboard.Panel] {
	return heatmap.NewPanelBuilder().
		Id(13).
		Title("Wake-up latency (heatmap)").
		Description("The agent's low-duty probe on a shielded CPU: how many wake-ups fell in each bucket (cpushield_latency_seconds).").
		Datasource(prom()).
		Height(8).Span(12).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		Color(heatmap.NewHeatmapColorOptionsBuilder().
			Mode(heatmap.HeatmapColorModeScheme).
			Scheme("Oranges").
			Steps(64)).
		WithTarget(query("A",
			`sum by (le) (increase(cpushield_latency_seconds_bucket{`+sel+`}[$__rate_interval]))`,
			"{{le}}").Format(prometheus.PromQueryFormatHeatmap))
}

// latencyQuantiles is p99, p99.99 and the maximum (the upper bound of the highest bucket
// with a sample: a histogram keeps no exact maximum).
func latencyQuantiles() cog.Builder[dashboard.Panel] {
	q := func(ref, phi, legend string) *prometheus.DataqueryBuilder {
		return query(ref,
			`histogram_quantile(`+phi+`, sum by (instance, cpu, le) (rate(cpushield_latency_seconds_bucket{`+sel+`}[$__rate_interval])))`,
			"{{instance}} CPU {{cpu}} "+legend)
	}
	return perSecond(14, "Wake-up latency: p99, p99.99, max",
		"From the probe's histogram: the 99th and 99.99th percentiles, and max, the upper bound of the highest bucket with a wake-up.",
		"s",
		q("A", "0.99", "p99"), q("B", "0.9999", "p99.99"), q("C", "1", "max"))
}

// build makes the dashboard.
func build() (dashboard.Dashboard, error) {
	instances := dashboard.NewQueryVariableBuilder(instanceVar).
		Label("Node").
		Datasource(prom()).
		Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(cpushield_build_info{job="cpushield"}, instance)`)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Multi(true).
		IncludeAll(true).
		AllValue(".*")
	return dashboard.NewDashboardBuilder("cpushield").
		Uid("cpushield").
		Description("What still reaches the shielded CPUs of each node, what the agent corrects, and the probe's latency (cpushield agent, job cpushield).").
		Tags([]string{"cpushield", "real-time"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(datasourceVar).
			Label("Data source").
			Type("prometheus")).
		WithVariable(instances).
		WithRow(dashboard.NewRowBuilder("The shield").Id(1)).
		WithPanel(shieldUp()).
		WithPanel(shieldCpus()).
		WithPanel(podTasks()).
		WithRow(dashboard.NewRowBuilder("What reaches the shielded CPUs").Id(5)).
		WithPanel(perSecond(6, "Interrupts/s per shielded CPU",
			"Interrupts handled on each shielded CPU, by CPU (cpushield_interrupts_total; per IRQ in the metric).",
			"ops",
			query("A",
				`sum by (instance, cpu) (rate(cpushield_interrupts_total{`+sel+`}[$__rate_interval]))`,
				"{{instance}} CPU {{cpu}}"))).
		WithPanel(perSecond(7, "Softirqs/s per shielded CPU",
			"Softirqs run on each shielded CPU, by CPU and kind (cpushield_softirqs_total).",
			"ops",
			query("A",
				`sum by (instance, cpu, kind) (rate(cpushield_softirqs_total{`+sel+`}[$__rate_interval]))`,
				"{{instance}} CPU {{cpu}} {{kind}}"))).
		WithPanel(perSecond(8, "Steal per shielded CPU",
			"Share of each shielded vCPU's time the hypervisor ran something else (cpushield_steal_seconds_total): not the shield's doing.",
			"percentunit",
			query("A",
				`sum by (instance, cpu) (rate(cpushield_steal_seconds_total{`+sel+`}[$__rate_interval]))`,
				"{{instance}} CPU {{cpu}}"))).
		WithRow(dashboard.NewRowBuilder("What the agent corrects and finds").Id(9)).
		WithPanel(perSecond(10, "Corrections by cause",
			"Times the agent re-applied the shield in each interval, by cause (cpushield_corrections_total).",
			"short",
			query("A",
				`sum by (instance, cause) (increase(cpushield_corrections_total{`+sel+`}[$__rate_interval]))`,
				"{{instance}} {{cause}}"))).
		WithPanel(perSecond(11, "Check findings by severity",
			"Findings of the agent's last periodic check of the shielded CPUs (cpushield_check_findings); breaks-shield is what `cpushield check` exits 3 for.",
			"short",
			query("A",
				`sum by (instance, severity) (cpushield_check_findings{`+sel+`})`,
				"{{instance}} {{severity}}"))).
		WithRow(dashboard.NewRowBuilder("Latency").Id(12)).
		WithPanel(latencyHeatmap()).
		WithPanel(latencyQuantiles()).
		Build()
}

// render is the dashboard as the file in dist/ holds it: indented JSON and a newline.
func render() ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	// PromQL's > and & as they are, not as \u003e.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func main() {
	out, err := render()
	if err != nil {
		fmt.Fprintf(os.Stderr, "grafana-dashboard: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
