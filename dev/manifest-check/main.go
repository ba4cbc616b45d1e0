// Command manifest-check checks the Kubernetes manifests of deploy/kubernetes
// against the real Kubernetes API types (k8s.io/api, and the Prometheus
// Operator's ServiceMonitor), decoding each document strictly as the API
// server's strict field validation does: an unknown, misspelt (also in
// case) or duplicated field, or a value of the wrong type, is an error.
// Then it checks that the objects fit together: selectors, ports, probes,
// the ConfigMap the DaemonSet mounts.
//
// Usage: go run . [FILE.yaml ...]   (default: ../../deploy/kubernetes/*.yaml)
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Object is one decoded manifest document.
type Object struct {
	File string
	Kind string
	Name string
	// Value is a pointer to the typed object (e.g. *appsv1.DaemonSet).
	Value any
}

// newObject returns an empty typed object for apiVersion and kind, or nil.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/Namespace":
		return &corev1.Namespace{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Service":
		return &corev1.Service{}
	case "apps/v1/DaemonSet":
		return &appsv1.DaemonSet{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	}
	return nil
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Decode splits a YAML file into documents and decodes each strictly into
// its Kubernetes type. Every problem is returned, each naming the file.
func Decode(file string, data []byte) ([]Object, []error) {
	var objects []Object
	var errs []error
	for i, doc := range separator.Split(string(data), -1) {
		where := fmt.Sprintf("%s (document %d)", file, i+1)
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		// YAMLToJSONStrict refuses duplicate keys in the YAML itself.
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", where, err))
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &meta); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", where, err))
			continue
		}
		value := newObject(meta.APIVersion, meta.Kind)
		if value == nil {
			errs = append(errs, fmt.Errorf("%s: unknown apiVersion/kind %q/%q: this validator knows v1 Namespace, ConfigMap, Service, apps/v1 DaemonSet and monitoring.coreos.com/v1 ServiceMonitor", where, meta.APIVersion, meta.Kind))
			continue
		}
		strict, err := kjson.UnmarshalStrict(js, value, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %v", where, meta.Kind, err))
			continue
		}
		for _, e := range strict {
			errs = append(errs, fmt.Errorf("%s: %s: %v", where, meta.Kind, e))
		}
		if len(strict) > 0 {
			continue
		}
		name := ""
		if m, ok := value.(interface{ GetName() string }); ok {
			name = m.GetName()
		}
		if name == "" {
			errs = append(errs, fmt.Errorf("%s: %s has no metadata.name", where, meta.Kind))
			continue
		}
		objects = append(objects, Object{File: file, Kind: meta.Kind, Name: name, Value: value})
	}
	return objects, errs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func subset(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// Check cross-checks decoded objects: what one names, another must have.
func Check(objects []Object) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	configMaps := map[string]*corev1.ConfigMap{}
	var daemonSets []*appsv1.DaemonSet
	var services []*corev1.Service
	var monitors []*monitoringv1.ServiceMonitor
	for _, o := range objects {
		switch v := o.Value.(type) {
		case *corev1.ConfigMap:
			configMaps[v.Name] = v
		case *appsv1.DaemonSet:
			daemonSets = append(daemonSets, v)
		case *corev1.Service:
			services = append(services, v)
		case *monitoringv1.ServiceMonitor:
			monitors = append(monitors, v)
		}
	}
	podLabels := map[string]string{}
	portsByName := map[string]int32{}
	for _, ds := range daemonSets {
		tpl := ds.Spec.Template
		podLabels = tpl.Labels
		if ds.Spec.Selector == nil || !subset(ds.Spec.Selector.MatchLabels, tpl.Labels) {
			bad("DaemonSet %s: spec.selector does not select the pod template's labels %v", ds.Name, tpl.Labels)
		}
		all := append(append([]corev1.Container{}, tpl.Spec.InitContainers...), tpl.Spec.Containers...)
		if len(tpl.Spec.Containers) == 0 {
			bad("DaemonSet %s: no containers", ds.Name)
		}
		volumes := map[string]corev1.Volume{}
		for _, v := range tpl.Spec.Volumes {
			volumes[v.Name] = v
		}
		for _, c := range all {
			if c.Image == "" {
				bad("DaemonSet %s: container %s has no image", ds.Name, c.Name)
			}
			for _, m := range c.VolumeMounts {
				if _, ok := volumes[m.Name]; !ok {
					bad("DaemonSet %s: container %s mounts volume %q, which spec.volumes lacks", ds.Name, c.Name, m.Name)
				}
			}
		}
		for _, v := range tpl.Spec.Volumes {
			if v.ConfigMap != nil {
				if _, ok := configMaps[v.ConfigMap.Name]; !ok {
					bad("DaemonSet %s: volume %s names ConfigMap %q, which no manifest defines", ds.Name, v.Name, v.ConfigMap.Name)
				}
			}
		}
		for _, c := range tpl.Spec.Containers {
			for _, p := range c.Ports {
				portsByName[p.Name] = p.ContainerPort
			}
			for what, probe := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
				if probe == nil || probe.HTTPGet == nil {
					bad("DaemonSet %s: container %s has no HTTP %s", ds.Name, c.Name, what)
					continue
				}
				if probe.HTTPGet.Path != "/status" {
					bad("DaemonSet %s: container %s %s asks %q; the agent serves /status", ds.Name, c.Name, what, probe.HTTPGet.Path)
				}
				if !portExists(probe.HTTPGet.Port, c.Ports) {
					bad("DaemonSet %s: container %s %s names port %s, which the container does not declare", ds.Name, c.Name, what, probe.HTTPGet.Port.String())
				}
			}
		}
		if a := tpl.Annotations["prometheus.io/port"]; a != "" && a != fmt.Sprint(portsByName["metrics"]) {
			bad("DaemonSet %s: annotation prometheus.io/port %q is not the metrics port %d", ds.Name, a, portsByName["metrics"])
		}
	}
	serviceLabels := map[string]string{}
	servicePorts := map[string]bool{}
	for _, s := range services {
		if !subset(s.Spec.Selector, podLabels) {
			bad("Service %s: selector %v does not select the DaemonSet's pods %v", s.Name, s.Spec.Selector, podLabels)
		}
		serviceLabels = s.Labels
		for _, p := range s.Spec.Ports {
			servicePorts[p.Name] = true
			if p.TargetPort.Type == intstr.String {
				if _, ok := portsByName[p.TargetPort.StrVal]; !ok {
					bad("Service %s: targetPort %q is no container port of the DaemonSet", s.Name, p.TargetPort.StrVal)
				}
			}
		}
	}
	for _, m := range monitors {
		if !subset(m.Spec.Selector.MatchLabels, serviceLabels) {
			bad("ServiceMonitor %s: selector %v does not select the Service's labels %v", m.Name, m.Spec.Selector.MatchLabels, serviceLabels)
		}
		for _, e := range m.Spec.Endpoints {
			if !servicePorts[e.Port] {
				bad("ServiceMonitor %s: endpoint port %q is no port of the Service", m.Name, e.Port)
			}
		}
	}
	return errs
}

func portExists(port intstr.IntOrString, ports []corev1.ContainerPort) bool {
	for _, p := range ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return true
		}
	}
	return false
}

// Validate decodes and cross-checks the files.
func Validate(files []string) ([]Object, []error) {
	var objects []Object
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		o, e := Decode(f, bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")))
		objects = append(objects, o...)
		errs = append(errs, e...)
	}
	return objects, append(errs, Check(objects)...)
}

func main() {
	files := os.Args[1:]
	if len(files) == 0 {
		files, _ = filepath.Glob("../../deploy/kubernetes/*.yaml")
		sort.Strings(files)
	}
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "validate: no manifests found: run it in dev/manifest-check or name the files")
		os.Exit(1)
	}
	objects, errs := Validate(files)
	for _, e := range errs {
		fmt.Fprintln(os.Stderr, "validate:", e)
	}
	if len(errs) > 0 {
		os.Exit(1)
	}
	for _, o := range objects {
		fmt.Printf("ok %s: %s %s\n", o.File, o.Kind, o.Name)
	}
}
