package spec_test

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/spec"
)

// TestStorageS3Settings: storage.s3 is added to every s3:// URL of the
// spec (sources, sinks, state, side outputs) that does not set the
// parameter itself, and to nothing else; a bad endpoint is refused at its
// position.
func TestStorageS3Settings(t *testing.T) {
	const doc = `
name: p
storage: {s3: {endpoint: "http://127.0.0.1:9000", region: eu-west-3, use_path_style: true}}
source: {type: files, url: "s3://in/events", format: jsonl, schema: {t: timestamp, u: string}, event_time: t,
         rejected_url: "s3://in/rejected?region=us-east-1"}
operators:
  - filter: "u != ''"
sink: {type: files, url: "s3://out/clicks", format: parquet}
state: {url: "local-state"}
`
	p, err := spec.Parse("p.yaml", []byte(doc), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for field, got := range map[string]string{"source.url": p.Source.URL, "sink.url": p.Sink.URL} {
		if want := "?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=eu-west-3&use_path_style=true"; !strings.HasSuffix(got, want) {
			t.Fatalf("%s = %q, want the storage settings %q", field, got, want)
		}
	}
	if got := p.Source.RejectedURL; !strings.Contains(got, "region=us-east-1") || strings.Contains(got, "eu-west-3") || !strings.Contains(got, "use_path_style=true") {
		t.Fatalf("a URL's own region must win: %q", got)
	}
	if !strings.HasPrefix(p.State.URL, "file://") || strings.Contains(p.State.URL, "?") {
		t.Fatalf("state.url %q: a local path takes no S3 settings", p.State.URL)
	}

	bad := strings.Replace(doc, `"http://127.0.0.1:9000"`, `"minio:9000"`, 1)
	_, err = spec.Parse("p.yaml", []byte(bad), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "p.yaml:3:") || !strings.Contains(err.Error(), "storage.s3.endpoint: want http://host[:port]") {
		t.Fatalf("bad endpoint: %v", err)
	}
	bad = strings.Replace(doc, "use_path_style: true", "path_style: true", 1)
	if _, err = spec.Parse("p.yaml", []byte(bad), t.TempDir()); err == nil || !strings.Contains(err.Error(), "path_style") {
		t.Fatalf("unknown storage field: %v", err)
	}
}
