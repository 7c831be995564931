// Package deploy checks the Kubernetes examples and the Dockerfile of this
// folder without a cluster: every YAML document decodes strictly into the
// Kubernetes API types (an unknown or misspelt field, a wrong type or a
// duplicate key fails), and the Indexed Job of deploy/workers (with the
// CronJob that wraps it) has the settings floe's workers rely on. It is a
// module of its own so that the main module does not depend on k8s.io.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decoder is a strict decoder of the API groups the examples use.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}

type doc struct {
	file string
	obj  runtime.Object
}

// documents splits a YAML file into its documents.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			out = append(out, d)
		}
	}
}

func stripComments(d []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(string(d), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.Bytes()
}

// loadAll strictly decodes every YAML document of deploy/ and
// deploy/workers/.
func loadAll(t *testing.T) []doc {
	t.Helper()
	dec := decoder(t)
	var docs []doc
	for _, pat := range []string{"*.yaml", "workers/*.yaml"} {
		files, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			for i, d := range documents(t, f) {
				obj, _, err := dec.Decode(d, nil, nil)
				if err != nil {
					t.Fatalf("%s: document %d does not decode strictly into the Kubernetes API types: %v", f, i, err)
				}
				docs = append(docs, doc{f, obj})
			}
		}
	}
	return docs
}

// TestStrictDecode: every example decodes strictly; a misspelt field, a
// wrong type and a duplicate key in the Indexed Job are refused (the
// decoding would catch a typo in an example).
func TestStrictDecode(t *testing.T) {
	docs := loadAll(t)
	kinds := map[string]int{}
	for _, d := range docs {
		kinds[reflect.TypeOf(d.obj).Elem().Name()]++
	}
	for _, k := range []string{"ConfigMap", "Secret", "CronJob", "Deployment", "Job"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the examples (%v)", k, kinds)
		}
	}
	job := documents(t, "workers/job.yaml")[0]
	dec := decoder(t)
	for name, bad := range map[string][]byte{
		"misspelt field": bytes.Replace(job, []byte("completionMode:"), []byte("completionMod:"), 1),
		"wrong type":     bytes.Replace(job, []byte("completions: 4"), []byte("completions: four"), 1),
		"duplicate key":  bytes.Replace(job, []byte("  parallelism: 4"), []byte("  parallelism: 4\n  parallelism: 4"), 1),
	} {
		if bytes.Equal(bad, job) {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if _, _, err := dec.Decode(bad, nil, nil); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// exitCodes reads floe's exit codes from cmd/floe/report.go.
func exitCodes(t *testing.T) map[string]int32 {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../cmd/floe/report.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int32{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "exit") {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
			n, _ := strconv.Atoi(lit.Value)
			codes[vs.Names[0].Name] = int32(n)
		}
		return true
	})
	if len(codes) < 3 {
		t.Fatalf("exit codes not found in cmd/floe/report.go: %v", codes)
	}
	return codes
}

// dockerfile reads what the examples must agree with: the image tag it
// documents, its final base and user, and its build command.
type dockerfile struct {
	image, final, user string
	build              string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 4 && f[1] == "docker" && f[2] == "build":
			if i := slices.Index(f, "-t"); i >= 0 && i+1 < len(f) {
				d.image = f[i+1]
			}
		case len(f) >= 2 && f[0] == "FROM":
			d.final = f[1]
		case len(f) == 2 && f[0] == "USER":
			d.user = f[1]
		case len(f) >= 2 && f[0] == "RUN" && strings.Contains(l, "go build"):
			d.build = l
		}
	}
	return d
}

// TestDockerfile: a static binary (CGO_ENABLED=0) of ./cmd/floe on a
// distroless or scratch base, run as a numeric non-root user.
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	if !strings.Contains(d.build, "CGO_ENABLED=0") || !strings.Contains(d.build, "./cmd/floe") {
		t.Errorf("the build %q must be CGO_ENABLED=0 go build ./cmd/floe", d.build)
	}
	if !strings.HasPrefix(d.final, "gcr.io/distroless/static") && d.final != "scratch" {
		t.Errorf("final base %q: want distroless/static or scratch", d.final)
	}
	uid, _, _ := strings.Cut(d.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root user (runAsNonRoot needs a number)", d.user)
	}
	if d.image == "" {
		t.Error("the Dockerfile must say how to build the image the examples name (docker build ... -t IMAGE)")
	}
}

// flagValue returns the value of --name in args ("" when absent).
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestIndexedJob checks the Indexed Job and the CronJob wrapping it: one
// pod per worker index, all at once (completions = parallelism = the
// --workers of the command line, which does not set --worker: it defaults
// to JOB_COMPLETION_INDEX), retries per index, no two pods of an index at
// once, the podFailurePolicy for floe's exit codes (fenced fails the Job,
// could-not-run counts, disruptions are ignored), a spec from a ConfigMap
// of deploy/workers with P >= W and shared (s3://) locations, the image and
// user of the Dockerfile, and the CronJob's template equal to the Job.
func TestIndexedJob(t *testing.T) {
	docs := loadAll(t)
	codes := exitCodes(t)
	df := readDockerfile(t)
	configMaps := map[string]*corev1.ConfigMap{}
	var job *batchv1.Job
	var cron *batchv1.CronJob
	for _, d := range docs {
		if !strings.HasPrefix(d.file, "workers/") {
			continue
		}
		switch o := d.obj.(type) {
		case *corev1.ConfigMap:
			configMaps[o.Name] = o
		case *batchv1.Job:
			job = o
		case *batchv1.CronJob:
			cron = o
		}
	}
	if job == nil || cron == nil {
		t.Fatal("deploy/workers must hold a Job and a CronJob")
	}
	if cron.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("CronJob: concurrencyPolicy %q, want Forbid (two Jobs of one pipeline fence each other)", cron.Spec.ConcurrencyPolicy)
	}
	if !reflect.DeepEqual(cron.Spec.JobTemplate.Spec, job.Spec) {
		t.Error("the CronJob's jobTemplate.spec differs from job.yaml's spec: keep them equal")
	}
	for where, spec := range map[string]*batchv1.JobSpec{"Job": &job.Spec, "CronJob": &cron.Spec.JobTemplate.Spec} {
		checkJobSpec(t, where, spec, codes, df, configMaps)
	}
}

func checkJobSpec(t *testing.T, where string, s *batchv1.JobSpec, codes map[string]int32, df dockerfile, configMaps map[string]*corev1.ConfigMap) {
	t.Helper()
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("%s: completionMode must be Indexed", where)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != *s.Parallelism {
		t.Fatalf("%s: completions and parallelism must both be W", where)
	}
	w := int(*s.Completions)
	if s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex < 1 {
		t.Errorf("%s: backoffLimitPerIndex must retry a failed worker index", where)
	}
	if s.MaxFailedIndexes == nil {
		t.Errorf("%s: maxFailedIndexes must be set (a worker index failed for good means the epoch cannot commit)", where)
	}
	if s.PodReplacementPolicy == nil || *s.PodReplacementPolicy != batchv1.Failed {
		t.Errorf("%s: podReplacementPolicy must be Failed (one pod per index at a time; required by podFailurePolicy)", where)
	}
	ps := s.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("%s: restartPolicy %q, want Never", where, ps.RestartPolicy)
	}
	// podFailurePolicy: fenced fails the Job, could-not-run is counted, a
	// disruption is ignored.
	want := map[int32]batchv1.PodFailurePolicyAction{codes["exitFenced"]: batchv1.PodFailurePolicyActionFailJob, codes["exitFailed"]: batchv1.PodFailurePolicyActionCount}
	got := map[int32]batchv1.PodFailurePolicyAction{}
	disruption := false
	if s.PodFailurePolicy == nil {
		t.Fatalf("%s: no podFailurePolicy", where)
	}
	for _, r := range s.PodFailurePolicy.Rules {
		if e := r.OnExitCodes; e != nil {
			if e.ContainerName == nil || *e.ContainerName != "floe" || e.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn {
				t.Errorf("%s: exit-code rule %+v must be `In` for container floe", where, e)
			}
			for _, v := range e.Values {
				got[v] = r.Action
			}
		}
		for _, c := range r.OnPodConditions {
			if c.Type == corev1.DisruptionTarget && r.Action == batchv1.PodFailurePolicyActionIgnore {
				disruption = true
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: exit-code actions %v, want %v (exit codes of cmd/floe/report.go)", where, got, want)
	}
	if !disruption {
		t.Errorf("%s: a DisruptionTarget pod condition must be ignored (a drained node is not the worker's fault)", where)
	}
	var c *corev1.Container
	for i := range ps.Containers {
		if ps.Containers[i].Name == "floe" {
			c = &ps.Containers[i]
		}
	}
	if c == nil {
		t.Fatalf("%s: no container floe", where)
	}
	if c.Image != df.image {
		t.Errorf("%s: image %q, the Dockerfile builds %q", where, c.Image, df.image)
	}
	if sc := c.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil ||
		strconv.FormatInt(*sc.RunAsUser, 10) != strings.Split(df.user, ":")[0] {
		t.Errorf("%s: securityContext must run as non-root user %s (the Dockerfile's USER)", where, df.user)
	}
	if !slices.Equal(c.Command, []string{"floe"}) || len(c.Args) < 2 || c.Args[0] != "run" {
		t.Fatalf("%s: command %q args %q: want floe run SPEC", where, c.Command, c.Args)
	}
	if v, ok := flagValue(c.Args, "workers"); !ok || v != strconv.Itoa(w) {
		t.Errorf("%s: --workers %q, want %d (= completions = parallelism)", where, v, w)
	}
	if _, ok := flagValue(c.Args, "worker"); ok {
		t.Errorf("%s: --worker must be left to default to $JOB_COMPLETION_INDEX", where)
	}
	runID := false
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" {
			t.Errorf("%s: JOB_COMPLETION_INDEX is set by the Indexed Job, not by hand", where)
		}
		if e.Name == "FLOE_RUN_ID" {
			// One name per run: the Job's, which a pod of the Job carries as
			// this label.
			runID = e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
				e.ValueFrom.FieldRef.FieldPath == "metadata.labels['batch.kubernetes.io/job-name']"
		}
	}
	if !runID {
		t.Errorf("%s: FLOE_RUN_ID (floe run --run-id) must come from the pod's batch.kubernetes.io/job-name label", where)
	}
	if v, ok := flagValue(c.Args, "worker-timeout"); !ok {
		t.Errorf("%s: --worker-timeout must be set", where)
	} else if d, err := time.ParseDuration(v); err != nil || d <= 0 {
		t.Errorf("%s: --worker-timeout %q: %v", where, v, err)
	}
	if !slices.Contains(c.Args, "--once") || slices.Contains(c.Args, "--trigger") {
		t.Errorf("%s: a Job runs --once", where)
	}
	checkWorkerSpec(t, where, ps, c, w, configMaps)
}

// checkWorkerSpec: the spec path is a ConfigMap key of deploy/workers, its
// state.parallelism is at least W and every location is s3:// (workers on
// different machines share nothing else).
func checkWorkerSpec(t *testing.T, where string, ps corev1.PodSpec, c *corev1.Container, w int, configMaps map[string]*corev1.ConfigMap) {
	t.Helper()
	specPath := c.Args[1]
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(specPath, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range ps.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm := configMaps[v.ConfigMap.Name]
			if cm == nil {
				t.Fatalf("%s: ConfigMap %q is not in deploy/workers", where, v.ConfigMap.Name)
			}
			var spec struct {
				State struct {
					URL         string `json:"url"`
					Parallelism int    `json:"parallelism"`
				} `json:"state"`
			}
			text := cm.Data[rel]
			if err := yaml.Unmarshal([]byte(text), &spec); err != nil || text == "" {
				t.Fatalf("%s: ConfigMap %s key %s: %v", where, cm.Name, rel, err)
			}
			if spec.State.Parallelism < w {
				t.Errorf("%s: state.parallelism %d < %d workers (a worker owns at least one subtask)", where, spec.State.Parallelism, w)
			}
			for _, u := range regexp.MustCompile(`url: *"?([^",}\s]+)`).FindAllStringSubmatch(text, -1) {
				if !strings.HasPrefix(u[1], "s3://") {
					t.Errorf("%s: location %s is not shared storage (s3://)", where, u[1])
				}
			}
			return
		}
	}
	t.Errorf("%s: the spec %s is not on a ConfigMap volume", where, specPath)
}
