package engine_test

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/internal/s3test"
)

// TestStorageBlockOnS3: a spec whose s3:// URLs carry no query string, with
// the connection settings written once in storage.s3, runs against a real
// S3 server and commits what the same spec with the settings on every URL
// commits.
func TestStorageBlockOnS3(t *testing.T) {
	e := s3Env(t)
	genData(t, e, datagen.Options{Rows: 300, Files: 3, Users: 7, Seed: 5})
	bare := func(u string) string { b, _, _ := strings.Cut(u, "?"); return b }
	tmpl := "storage: {s3: {endpoint: \"" + s3test.Shared(t).Endpoint + "\", region: " + s3test.Region + ", use_path_style: true}}\n" + windowSpec
	r := strings.NewReplacer("{{source}}", bare(e.source), "{{state}}", bare(e.state), "{{sink}}", bare(e.sink))
	p := e.pipeline(t, r.Replace(tmpl))
	if !strings.Contains(p.Sink.URL, "use_path_style=true") {
		t.Fatalf("sink.url %q has no storage settings", p.Sink.URL)
	}
	res := run(t, p, engine.Options{Drain: true})
	if res.Epochs == 0 {
		t.Fatalf("nothing committed: %+v", res)
	}
	got := committedRows(t, p)

	ref := fileEnv(t)
	genData(t, ref, datagen.Options{Rows: 300, Files: 3, Users: 7, Seed: 5})
	pr := ref.pipeline(t, windowSpec)
	run(t, pr, engine.Options{Drain: true})
	if want := committedRows(t, pr); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("S3 with a storage block: %d rows, file://: %d", len(got), len(want))
	}
}
