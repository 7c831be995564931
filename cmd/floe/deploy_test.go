package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/spec"
)

const deployDir = "../../deploy"

// k8sDoc is one document of a YAML file in deploy/.
type k8sDoc struct {
	file string
	obj  map[string]any
}

func (d k8sDoc) kind() string { s, _ := d.obj["kind"].(string); return s }
func (d k8sDoc) name() string { s, _ := dig(d.obj, "metadata", "name").(string); return s }

// dig walks nested maps.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func list(v any) []any { l, _ := v.([]any); return l }

// loadDeploy parses every YAML document under deploy/.
func loadDeploy(t *testing.T) []k8sDoc {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml", "workers/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(deployDir, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("no YAML files in %s", deployDir)
	}
	var docs []k8sDoc
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(r)
		for i := 0; ; i++ {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d does not parse: %v", f, i, err)
			}
			if obj == nil {
				continue
			}
			rel, err := filepath.Rel(deployDir, f)
			if err != nil {
				t.Fatal(err)
			}
			d := k8sDoc{file: rel, obj: obj}
			if _, ok := obj["apiVersion"].(string); !ok || d.kind() == "" || d.name() == "" {
				t.Errorf("%s: document %d lacks apiVersion, kind or metadata.name", f, i)
			}
			docs = append(docs, d)
		}
		r.Close()
	}
	return docs
}

// podSpec returns the pod template spec of a workload (nil: not one).
func podSpec(d k8sDoc) map[string]any {
	var v any
	switch d.kind() {
	case "Deployment", "StatefulSet", "DaemonSet", "Job":
		v = dig(d.obj, "spec", "template", "spec")
	case "CronJob":
		v = dig(d.obj, "spec", "jobTemplate", "spec", "template", "spec")
	case "Pod":
		v = d.obj["spec"]
	}
	m, _ := v.(map[string]any)
	return m
}

// checkFloeArgs runs cobra's command lookup, flag parsing and argument
// validation of the floe command tree on args, without executing anything.
func checkFloeArgs(args []string) (*cobra.Command, []string, error) {
	root := newRoot(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil {
		return nil, nil, err
	}
	if cmd == root || !cmd.Runnable() {
		return nil, nil, fmt.Errorf("%q names no floe command", strings.Join(args, " "))
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return nil, nil, fmt.Errorf("floe %s: %w", cmd.Name(), err)
	}
	pos := cmd.Flags().Args()
	if err := cmd.ValidateArgs(pos); err != nil {
		return nil, nil, fmt.Errorf("floe %s: %w", cmd.Name(), err)
	}
	return cmd, pos, nil
}

func TestCheckFloeArgsRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"run", "/etc/floe/p.yaml", "--no-such-flag"},
		{"run", "/etc/floe/p.yaml", "--trigger", "soon"},
		{"run"},
		{"stats", "/etc/floe/p.yaml"},
		{"savepoint", "/etc/floe/p.yaml"},
	} {
		if _, _, err := checkFloeArgs(args); err == nil {
			t.Errorf("checkFloeArgs(%q) accepted", args)
		}
	}
	if cmd, pos, err := checkFloeArgs([]string{"run", "/p.yaml", "--trigger", "30s", "--metrics-addr", ":9464"}); err != nil || cmd.Name() != "run" || len(pos) != 1 {
		t.Errorf("a valid command line: %v, %v", err, pos)
	}
}

// TestDeployExamples parses every YAML in deploy/ and checks that the floe
// containers' args are a valid floe command line (cobra parses them without
// running), that the spec they name is mounted from a ConfigMap of deploy/
// whose pipeline.yaml is a valid spec, that S3 credentials come from a
// Secret of deploy/ through the standard AWS variables, and the
// operational settings each example documents: the CronJob runs --once
// with concurrencyPolicy Forbid and says what exit code 3 means; the
// Deployment runs --trigger with --metrics-addr, a Prometheus scrape
// annotation and a readiness probe on that port.
func TestDeployExamples(t *testing.T) {
	docs := loadDeploy(t)
	configMaps := map[string]map[string]any{}
	secrets := map[string]map[string]bool{}
	for _, d := range docs {
		switch d.kind() {
		case "ConfigMap":
			m, _ := d.obj["data"].(map[string]any)
			configMaps[d.name()] = m
		case "Secret":
			keys := map[string]bool{}
			for _, f := range []string{"data", "stringData"} {
				m, _ := d.obj[f].(map[string]any)
				for k := range m {
					keys[k] = true
				}
			}
			secrets[d.name()] = keys
		}
	}
	kinds := map[string]int{}
	for _, d := range docs {
		ps := podSpec(d)
		if ps == nil {
			continue
		}
		kinds[d.kind()]++
		where := d.file + " " + d.kind() + "/" + d.name()
		floes := 0
		for _, c := range list(ps["containers"]) {
			c, _ := c.(map[string]any)
			command := list(c["command"])
			if len(command) == 0 || command[0] != "floe" {
				continue
			}
			floes++
			var args []string
			for i, a := range list(c["args"]) {
				s, ok := a.(string)
				if !ok {
					t.Errorf("%s: args[%d] = %v (%T): Kubernetes wants strings; quote it", where, i, a, a)
				}
				args = append(args, s)
			}
			cmd, pos, err := checkFloeArgs(args)
			if err != nil {
				t.Errorf("%s: args %q: %v", where, args, err)
				continue
			}
			if cmd.Name() != "run" {
				continue
			}
			checkMountedSpec(t, where, ps, c, pos[0], configMaps)
			checkCredentials(t, where, c, secrets)
			fl := cmd.Flags()
			trigger := fl.Changed("trigger")
			switch d.kind() {
			case "CronJob", "Job":
				if trigger {
					t.Errorf("%s: a Job runs `floe run --once`, not --trigger", where)
				}
				if d.kind() == "CronJob" && dig(d.obj, "spec", "concurrencyPolicy") != "Forbid" {
					t.Errorf("%s: concurrencyPolicy must be Forbid (two runs of one pipeline fence each other)", where)
				}
				text := mustRead(t, filepath.Join(deployDir, d.file))
				if !strings.Contains(text, "#   3  fenced") || !strings.Contains(text, "another writer") {
					t.Errorf("%s: the comments must say what exit code 3 means", where)
				}
			case "Deployment":
				if !trigger {
					t.Errorf("%s: a Deployment runs `floe run --trigger`", where)
				}
				addr, _ := fl.GetString("metrics-addr")
				_, port, err := net.SplitHostPort(addr)
				if err != nil {
					t.Errorf("%s: --metrics-addr %q: %v", where, addr, err)
					continue
				}
				ann, _ := dig(d.obj, "spec", "template", "metadata", "annotations").(map[string]any)
				if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != port {
					t.Errorf("%s: the pod annotations %v must ask Prometheus to scrape port %s", where, ann, port)
				}
				probe, _ := dig(c, "readinessProbe", "httpGet").(map[string]any)
				if probe == nil || probe["path"] != "/metrics" || containerPort(c, probe["port"]) != port {
					t.Errorf("%s: readinessProbe %v: want an httpGet of /metrics on the metrics port %s", where, probe, port)
				}
				if n, _ := dig(d.obj, "spec", "replicas").(uint64); n != 1 {
					t.Errorf("%s: replicas %v: one writer per pipeline", where, dig(d.obj, "spec", "replicas"))
				}
			}
		}
		if floes == 0 {
			t.Errorf("%s: no container runs floe", where)
		}
	}
	if kinds["CronJob"] == 0 || kinds["Deployment"] == 0 {
		t.Errorf("deploy/ must hold a CronJob and a Deployment, has %v", kinds)
	}
}

// containerPort resolves a probe port (a number or a port name) to a number.
func containerPort(c map[string]any, p any) string {
	if s, ok := p.(string); ok {
		for _, x := range list(c["ports"]) {
			if dig(x, "name") == s {
				return fmt.Sprint(dig(x, "containerPort"))
			}
		}
		return ""
	}
	return fmt.Sprint(p)
}

// checkMountedSpec checks that specPath is a key of a ConfigMap volume of
// deploy/ mounted in container c, and that the key holds a valid spec.
func checkMountedSpec(t *testing.T, where string, ps, c map[string]any, specPath string, configMaps map[string]map[string]any) {
	t.Helper()
	for _, m := range list(c["volumeMounts"]) {
		mount, _ := dig(m, "mountPath").(string)
		rel, ok := strings.CutPrefix(specPath, strings.TrimSuffix(mount, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range list(ps["volumes"]) {
			if dig(v, "name") != dig(m, "name") {
				continue
			}
			cmName, _ := dig(v, "configMap", "name").(string)
			data, found := configMaps[cmName]
			if !found {
				t.Errorf("%s: %s is mounted from ConfigMap %q, which deploy/ does not define", where, specPath, cmName)
				return
			}
			text, _ := data[path.Clean(rel)].(string)
			if text == "" {
				t.Errorf("%s: ConfigMap %s has no key %q for %s", where, cmName, rel, specPath)
				return
			}
			if _, err := spec.Parse(cmName+"/"+rel, []byte(text), t.TempDir()); err != nil {
				t.Errorf("%s: the spec in ConfigMap %s is not valid: %v", where, cmName, err)
			}
			return
		}
	}
	t.Errorf("%s: the spec %s is not on a ConfigMap volume mount", where, specPath)
}

// checkCredentials checks that the AWS key pair comes from a Secret of
// deploy/.
func checkCredentials(t *testing.T, where string, c map[string]any, secrets map[string]map[string]bool) {
	t.Helper()
	for _, want := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		ok := false
		for _, e := range list(c["env"]) {
			if dig(e, "name") != want {
				continue
			}
			name, _ := dig(e, "valueFrom", "secretKeyRef", "name").(string)
			key, _ := dig(e, "valueFrom", "secretKeyRef", "key").(string)
			ok = secrets[name][key]
		}
		if !ok {
			t.Errorf("%s: %s must come from a Secret key defined in deploy/", where, want)
		}
	}
}
