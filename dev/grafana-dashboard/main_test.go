package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

const checkedIn = "../../dist/grafana/cpushield.json"

// The file in dist/ is exactly what the generator makes: edit main.go, then
// `go run . > ../../dist/grafana/cpushield.json`.
func TestTheCheckedInDashboardIsWhatTheGeneratorMakes(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(checkedIn)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the generator's output: run `go run . > %s` in dev/grafana-dashboard", checkedIn, checkedIn)
	}
}

// The checked-in file decodes into the SDK's typed dashboard, and it has the panels
// the dashboard promises, each with Prometheus queries on the agent's job.
func TestTheDashboardDecodesIntoTheTypedModelWithEveryPanelQueryingTheAgent(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	text, err := os.ReadFile(checkedIn)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard.Dashboard
	if err := json.Unmarshal(text, &d); err != nil {
		t.Fatalf("decoding %s: %v", checkedIn, err)
	}
	titles := map[string]bool{}
	ids := map[uint32]bool{}
	metric := regexp.MustCompile(`\bcpushield_[a-z_]+`)
	for _, p := range d.Panels {
		panel := p.Panel
		if panel == nil {
			continue
		}
		if panel.Id == nil || ids[*panel.Id] {
			t.Errorf("panel %q: no id or a duplicate one", *panel.Title)
		} else {
			ids[*panel.Id] = true
		}
		titles[*panel.Title] = true
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q has no query", *panel.Title)
		}
		for _, target := range panel.Targets {
			q, ok := target.(*prometheus.Dataquery)
			if !ok {
				t.Fatalf("panel %q: a %T, not a Prometheus query", *panel.Title, target)
			}
			if !metric.MatchString(q.Expr) || !regexp.MustCompile(`job="cpushield", instance=~"\$instance"`).MatchString(q.Expr) {
				t.Errorf("panel %q: %q names no cpushield metric of the chosen nodes", *panel.Title, q.Expr)
			}
		}
	}
	for _, want := range []string{
		"Shield up", "Interrupts/s per shielded CPU", "Softirqs/s per shielded CPU",
		"Steal per shielded CPU", "Corrections by cause", "Check findings by severity",
		"Wake-up latency (heatmap)", "Wake-up latency: p99, p99.99, max",
	} {
		if !titles[want] {
			t.Errorf("no panel %q (panels: %v)", want, titles)
		}
	}
}
