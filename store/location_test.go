package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/store"
)

func mustLocation(t *testing.T, raw string) store.Location {
	t.Helper()
	l, err := store.ParseLocation(raw)
	if err != nil {
		t.Fatalf("ParseLocation(%q): %v", raw, err)
	}
	return l
}

// TestLocationFileContains: spellings of a path inside the source that URL
// text comparison misses are all caught.
func TestLocationFileContains(t *testing.T) {
	d := t.TempDir()
	for _, sub := range []string{"in", "other", "inx"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(d, "in"), filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	src := mustLocation(t, "file://"+d+"/in")
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"file://" + d + "/in/o", true},
		{"file://" + d + "/other/../in/o", true},
		{"file://" + d + "//in/o", true},
		{"file://localhost" + d + "/in/o", true},
		{d + "/in/o", true},
		{d + "/in/./o/", true},
		{"file://" + d + "/link/o", true},          // a symlink to the source
		{"file://" + d + "/link/new/deeper", true}, // ... below which nothing exists yet
		{"file://" + d + "/in", true},              // the source itself
		{"file://" + d + "/inx/o", false},          // a sibling sharing a name prefix
		{"file://" + d + "/other/o", false},        // a sibling
		{"file://" + d, false},                     // the parent
		{"s3://b/" + strings.TrimPrefix(d, "/") + "/in", false},
	} {
		l := mustLocation(t, tc.url)
		if got := src.Contains(l); got != tc.want {
			t.Errorf("%s contains %s (%s) = %v, want %v", src, tc.url, l, got, tc.want)
		}
		if !tc.want && !strings.HasPrefix(tc.url, "s3:") && l.Path == filepath.Join(d, "in") {
			t.Errorf("%s resolved to the source", tc.url)
		}
	}
	if parent := mustLocation(t, "file://"+d); !parent.Contains(src) || !src.Overlaps(parent) {
		t.Errorf("%s does not contain %s", parent, src)
	}
	if !src.Same(mustLocation(t, "file://localhost"+d+"/other/../link/")) {
		t.Errorf("spellings of one directory are not Same")
	}
	if got, want := mustLocation(t, "file://"+d+"/other/../link/x/").String(), "file://"+mustLocation(t, d).Path+"/in/x"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestLocationS3(t *testing.T) {
	const ep = "endpoint=http://127.0.0.1:9000"
	src := mustLocation(t, "s3://bkt/in?"+ep+"&use_path_style=true&region=us-east-1")
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"s3://bkt/in/o?" + ep, true},
		{"s3://bkt//in/./o/?" + ep + "&region=eu-west-1", true}, // connection params are not identity
		{"s3://bkt/x/../in/o?" + ep, true},
		{"s3://BKT/in/o?endpoint=HTTP://127.0.0.1:9000/", true},
		{"s3://bkt/in?" + ep + "&floe_x=1", true},
		{"s3://bkt/inx/o?" + ep, false},
		{"s3://bkt/o?" + ep, false},
		{"s3://other/in/o?" + ep, false},
		{"s3://bkt/in/o?endpoint=http://127.0.0.1:9001", false}, // another server
		{"s3://bkt/in/o", false},                                // AWS, not the local server
		{"file:///bkt/in/o", false},
	} {
		if got := src.Contains(mustLocation(t, tc.url)); got != tc.want {
			t.Errorf("%s contains %s = %v, want %v", src, tc.url, got, tc.want)
		}
	}
	whole := mustLocation(t, "s3://bkt?"+ep)
	if !whole.Contains(src) || src.Contains(whole) {
		t.Errorf("bucket root vs prefix: %v %v", whole.Contains(src), src.Contains(whole))
	}
	if !mustLocation(t, "s3://b?endpoint=http://h:80").Same(mustLocation(t, "s3://b/?endpoint=http://H")) {
		t.Errorf("default port or case makes a different endpoint")
	}
	if got, want := mustLocation(t, "s3://Bkt//a/b/?region=x&use_path_style=true&endpoint=http://127.0.0.1:9000/").String(),
		"s3://bkt/a/b?endpoint=http://127.0.0.1:9000"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestLocationRefuses(t *testing.T) {
	for _, raw := range []string{
		"relative/dir",
		"file://host/dir",
		"gs://b/p",
		"s3:///p",
		"s3://AKIAEXAMPLE:topsecret@b/p",
		"s3://b/p?endpoint=http://AKIAEXAMPLE:topsecret@127.0.0.1:9000",
	} {
		_, err := store.ParseLocation(raw)
		if err == nil {
			t.Errorf("ParseLocation(%q) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), "topsecret") || strings.Contains(err.Error(), "AKIAEXAMPLE") {
			t.Errorf("ParseLocation(%q) error shows credentials: %v", raw, err)
		}
	}
}

func TestLocationMem(t *testing.T) {
	m := mustLocation(t, "mem://")
	if !m.Ephemeral() || m.Same(mustLocation(t, "mem://")) || m.Contains(m) || m.String() != "mem://" {
		t.Errorf("mem location: %+v", m)
	}
	if mustLocation(t, "/tmp/x").Ephemeral() || !store.IsMem("mem://") || !store.IsMem("MEM://x") || store.IsMem("/tmp/mem") {
		t.Errorf("IsMem/Ephemeral wrong")
	}
}
