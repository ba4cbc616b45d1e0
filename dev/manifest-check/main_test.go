package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func shipped(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	sort.Strings(files)
	return files
}

func TestShippedManifestsDecodeStrictlyAndFitTogether(t *testing.T) {
	objects, errs := Validate(shipped(t))
	for _, e := range errs {
		t.Error(e)
	}
	kinds := map[string]bool{}
	for _, o := range objects {
		kinds[o.Kind] = true
	}
	for _, k := range []string{"Namespace", "ConfigMap", "DaemonSet", "Service", "ServiceMonitor"} {
		if !kinds[k] {
			t.Errorf("no %s among the manifests", k)
		}
	}
}

// mutated validates every shipped manifest with `old` replaced by `new`
// (exactly once) in `file`, and returns the errors as one text.
func mutated(t *testing.T, file, old, new string) string {
	t.Helper()
	var objects []Object
	var errs []error
	for _, f := range shipped(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if filepath.Base(f) == file {
			if n := strings.Count(text, old); n == 0 {
				t.Fatalf("%s does not contain %q: update the test", file, old)
			}
			text = strings.Replace(text, old, new, 1)
		}
		o, e := Decode(f, []byte(text))
		objects = append(objects, o...)
		errs = append(errs, e...)
	}
	errs = append(errs, Check(objects)...)
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

func expectError(t *testing.T, got string, wants ...string) {
	t.Helper()
	if got == "" {
		t.Fatalf("the broken manifest was accepted")
	}
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("error %q does not mention %q", got, w)
		}
	}
}

func TestAnUnknownFieldIsRefused(t *testing.T) {
	got := mutated(t, "daemonset.yaml", "hostPID: true", "hostPIDs: true")
	expectError(t, got, "daemonset.yaml", `unknown field "spec.template.spec.hostPIDs"`)
}

func TestAFieldMisspeltOnlyInCaseIsRefused(t *testing.T) {
	// encoding/json would accept hostPid for hostPID; the API server does not.
	got := mutated(t, "daemonset.yaml", "hostPID: true", "hostPid: true")
	expectError(t, got, `unknown field "spec.template.spec.hostPid"`)
}

func TestAMisspeltFieldDeepInAContainerIsRefused(t *testing.T) {
	got := mutated(t, "daemonset.yaml", "mountPath: /run/cpushield", "mountpath: /run/cpushield")
	expectError(t, got, "mountpath")
}

func TestAValueOfTheWrongTypeIsRefused(t *testing.T) {
	got := mutated(t, "daemonset.yaml", "containerPort: 9477", `containerPort: "9477"`)
	expectError(t, got, "containerPort")
}

func TestADuplicatedKeyIsRefused(t *testing.T) {
	got := mutated(t, "daemonset.yaml", "hostPID: true", "hostPID: true\n      hostPID: false")
	expectError(t, got, "hostPID", "already set")
}

func TestAnUnknownKindIsRefused(t *testing.T) {
	got := mutated(t, "daemonset.yaml", "kind: DaemonSet", "kind: DeamonSet")
	expectError(t, got, `"DeamonSet"`)
}

func TestAMisspeltServiceMonitorFieldIsRefused(t *testing.T) {
	got := mutated(t, "servicemonitor.yaml", "namespaceSelector:", "namespaceSelecter:")
	expectError(t, got, `unknown field "spec.namespaceSelecter"`)
}

func TestAMisspeltConfigMapKeyOfTheConfigMapIsRefused(t *testing.T) {
	got := mutated(t, "configmap.yaml", "\ndata:", "\ndatas:")
	expectError(t, got, `unknown field "datas"`)
}

func TestObjectsThatDoNotFitTogetherAreRefused(t *testing.T) {
	cases := []struct{ file, old, new, want string }{
		{"service.yaml", "targetPort: metrics", "targetPort: metric", `targetPort "metric"`},
		{"servicemonitor.yaml", "- port: metrics", "- port: http", `endpoint port "http"`},
		{"daemonset.yaml", "path: /status", "path: /healthz", `"/healthz"`},
		{"daemonset.yaml", "name: cpushield-config", "name: cpushield-conf", `ConfigMap "cpushield-conf"`},
		{"daemonset.yaml", `prometheus.io/port: "9477"`, `prometheus.io/port: "9478"`, `prometheus.io/port "9478"`},
	}
	for _, c := range cases {
		expectError(t, mutated(t, c.file, c.old, c.new), c.want)
	}
}
