package manifest

import (
	"sort"
	"testing"
)

func TestPaths(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"latest", LatestPath, "_latest.json"},
		{"generation dir", GenerationDir(3), "gen=000003/"},
		{"generation", GenerationPath(3), "gen=000003/_generation.json"},
		{"epoch dir", EpochDir(3, 41), "gen=000003/epoch=0000000041/"},
		{"manifest", ManifestPath(3, 41), "gen=000003/epoch=0000000041/_manifest.json"},
		{"attempt dir", AttemptDir(3, 41, attemptA), "gen=000003/epoch=0000000041/" + attemptA + "/"},
		{"state", StatePath(3, 41, attemptA, "window-0", 2), "gen=000003/epoch=0000000041/" + attemptA + "/op=window-0/s=0002.parquet"},
		{"source", SourcePath(3, 41, attemptA, "seen/000001.jsonl"), "gen=000003/epoch=0000000041/" + attemptA + "/source/seen/000001.jsonl"},
		{"output", OutputName(3, 41, 2, attemptA, "parquet"), "part-g000003-e0000000041-s0002-0f8fad5b.parquet"},
		{"output dotted ext", OutputName(3, 41, 2, attemptA, ".parquet"), "part-g000003-e0000000041-s0002-0f8fad5b.parquet"},
		{"output no ext", OutputName(3, 41, 2, attemptA, ""), "part-g000003-e0000000041-s0002-0f8fad5b"},
		{"wide numbers", ManifestPath(1234567, 12345678901), "gen=1234567/epoch=12345678901/_manifest.json"},
		{"ref manifest", Ref{Generation: 3, Epoch: 41}.ManifestPath(), "gen=000003/epoch=0000000041/_manifest.json"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestPathsSortNumerically(t *testing.T) {
	var keys []string
	for _, gen := range []int64{1, 2, 9, 10, 11, 100} {
		for _, epoch := range []int64{1, 2, 9, 10, 99, 100, 1000} {
			keys = append(keys, ManifestPath(gen, epoch))
		}
	}
	if !sort.StringsAreSorted(keys) {
		t.Fatalf("manifest keys in numeric order are not sorted lexicographically: %q", keys)
	}
	var states []string
	for s := 0; s < 20; s++ {
		states = append(states, StatePath(1, 1, attemptA, "op", s))
	}
	if !sort.StringsAreSorted(states) {
		t.Fatalf("state keys are not sorted: %q", states)
	}
}

func TestParseKey(t *testing.T) {
	epochDir := EpochDir(3, 41)
	tests := []struct {
		key  string
		ok   bool
		want KeyInfo
	}{
		{LatestPath, true, KeyInfo{Kind: KeyLatest}},
		{GenerationPath(3), true, KeyInfo{Kind: KeyGeneration, Generation: 3}},
		{ManifestPath(3, 41), true, KeyInfo{Kind: KeyManifest, Generation: 3, Epoch: 41}},
		{StatePath(3, 41, attemptA, "window-0", 2), true,
			KeyInfo{Kind: KeyState, Generation: 3, Epoch: 41, Attempt: attemptA, OpID: "window-0", Subtask: 2}},
		{StatePath(3, 41, attemptA, "w", 12345), true,
			KeyInfo{Kind: KeyState, Generation: 3, Epoch: 41, Attempt: attemptA, OpID: "w", Subtask: 12345}},
		{SourcePath(3, 41, attemptA, "seen/1.jsonl"), true,
			KeyInfo{Kind: KeySource, Generation: 3, Epoch: 41, Attempt: attemptA, SourceName: "seen/1.jsonl"}},
		{ManifestPath(1234567, 12345678901), true, KeyInfo{Kind: KeyManifest, Generation: 1234567, Epoch: 12345678901}},

		// Inside the layout but not a recognised file: Other, with what is known.
		{"gen=000003", true, KeyInfo{Generation: 3}},
		{"gen=000003/", true, KeyInfo{Generation: 3}},
		{"gen=000003/stray.tmp", true, KeyInfo{Generation: 3}},
		{"gen=000003/epoch=41/_manifest.json", true, KeyInfo{Generation: 3}},
		{epochDir + "_manifest.json.tmp", true, KeyInfo{Generation: 3, Epoch: 41}},
		{epochDir + "not-a-uuid/op=w/s=0000.parquet", true, KeyInfo{Generation: 3, Epoch: 41}},
		{epochDir + attemptA + "/", true, KeyInfo{Generation: 3, Epoch: 41, Attempt: attemptA}},
		{epochDir + attemptA + "/op=W/s=0000.parquet", true, KeyInfo{Generation: 3, Epoch: 41, Attempt: attemptA}},
		{epochDir + attemptA + "/op=w/s=0.parquet", true, KeyInfo{Generation: 3, Epoch: 41, Attempt: attemptA}},
		{epochDir + attemptA + "/op=w/s=0000.json", true, KeyInfo{Generation: 3, Epoch: 41, Attempt: attemptA}},
		{epochDir + attemptA + "/op=w/x/s=0000.parquet", true, KeyInfo{Generation: 3, Epoch: 41, Attempt: attemptA}},
		{epochDir + attemptA + "/source/", true, KeyInfo{Generation: 3, Epoch: 41, Attempt: attemptA}},
		{epochDir + attemptA + "/source/a/../b", true, KeyInfo{Generation: 3, Epoch: 41, Attempt: attemptA}},

		// Outside the layout.
		{"", false, KeyInfo{}},
		{"gen=3/_generation.json", false, KeyInfo{}},
		{"gen=0000003/_generation.json", false, KeyInfo{}},
		{"gen=000000/_generation.json", false, KeyInfo{}},
		{"gen=-00003/_generation.json", false, KeyInfo{}},
		{"gen=+00003/_generation.json", false, KeyInfo{}},
		{"savepoints/nightly/" + ManifestPath(3, 41), false, KeyInfo{}},
		{"/" + LatestPath, false, KeyInfo{}},
		{"_latest.json.bak", false, KeyInfo{}},
	}
	for _, tt := range tests {
		got, ok := ParseKey(tt.key)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseOutputName(t *testing.T) {
	tests := []struct {
		key  string
		ok   bool
		want OutputInfo
	}{
		{OutputName(3, 41, 2, attemptA, "parquet"), true, OutputInfo{3, 41, 2, "0f8fad5b", ".parquet", "", ""}},
		{"dt=2026-11-29/" + OutputName(3, 41, 0, attemptA, "snappy.parquet"), true, OutputInfo{3, 41, 0, "0f8fad5b", ".snappy.parquet", "dt=2026-11-29", ""}},
		{OutputName(3, 41, 2, attemptA, ""), true, OutputInfo{3, 41, 2, "0f8fad5b", "", "", ""}},
		{"dt=2015-07-15/hm=08%3A00/" + OutputName(3, 41, 1, attemptA, "jsonl"), true, OutputInfo{3, 41, 1, "0f8fad5b", ".jsonl", "dt=2015-07-15/hm=08%3A00", ""}},
		{"k=__HIVE_DEFAULT_PARTITION__/" + OutputName(3, 41, 1, attemptA, "jsonl"), true, OutputInfo{3, 41, 1, "0f8fad5b", ".jsonl", "k=__HIVE_DEFAULT_PARTITION__", ""}},
		{"_rejected/" + OutputName(3, 41, 0, attemptA, "jsonl"), true, OutputInfo{3, 41, 0, "0f8fad5b", ".jsonl", "", "_rejected"}},
		{"@hot/k=1/" + OutputName(3, 41, 0, attemptA, "parquet"), true, OutputInfo{3, 41, 0, "0f8fad5b", ".parquet", "k=1", "@hot"}},
		{"data/day=2026-11-29/" + OutputName(3, 41, 0, attemptA, "parquet"), true, OutputInfo{3, 41, 0, "0f8fad5b", ".parquet", "day=2026-11-29", "data"}},
		{"k=1/x/" + OutputName(3, 41, 0, attemptA, "parquet"), true, OutputInfo{3, 41, 0, "0f8fad5b", ".parquet", "", "k=1/x"}},
		{"a=b=c/" + OutputName(3, 41, 0, attemptA, "parquet"), true, OutputInfo{3, 41, 0, "0f8fad5b", ".parquet", "", "a=b=c"}},
		{"=v/" + OutputName(3, 41, 0, attemptA, "parquet"), true, OutputInfo{3, 41, 0, "0f8fad5b", ".parquet", "", "=v"}},
		{"part-g3-e41-s2-0f8fad5b.parquet", false, OutputInfo{}},
		{"part-g000003-e0000000041-s0002-0F8FAD5B.parquet", false, OutputInfo{}},
		{"part-g000003-e0000000041-s0002-0f8fad.parquet", false, OutputInfo{}},
		{"part-g000000-e0000000041-s0002-0f8fad5b.parquet", false, OutputInfo{}},
		{"other-g000003-e0000000041-s0002-0f8fad5b.parquet", false, OutputInfo{}},
		{"part-g000003-e0000000041-0f8fad5b.parquet", false, OutputInfo{}},
	}
	for _, tt := range tests {
		got, ok := ParseOutputName(tt.key)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseOutputName(%q) = %+v, %v; want %+v, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}

// TestEscapeHivePathName pins the escaping of partition directory names to
// Hive's FileUtils.escapePathName (which Spark copies): its special
// characters and control characters as %XX in upper-case hex, everything
// else (spaces, non-ASCII letters) as is; null and empty values as the
// default partition.
func TestEscapeHivePathName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"2015-07-15", "2015-07-15"},
		{"08:00", "08%3A00"},
		{"a/b", "a%2Fb"},
		{"k=v", "k%3Dv"},
		{"100%", "100%25"},
		{`"#%'*/:=?\{[]^`, "%22%23%25%27%2A%2F%3A%3D%3F%5C%7B%5B%5D%5E"},
		{"\t\n\x00\x1f\x7f", "%09%0A%00%1F%7F"},
		{"é ü 東京", "é ü 東京"},
		{"a b,c;d(e)f!g~h&i+j$k@l}m|n<o>p`", "a b,c;d(e)f!g~h&i+j$k@l}m|n<o>p`"},
		{"bad\xffutf8", "bad%FFutf8"},
		{"..", ".."},
	}
	for _, tt := range tests {
		if got := EscapeHivePathName(tt.in); got != tt.want {
			t.Errorf("EscapeHivePathName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct {
		col, val string
		valid    bool
		want     string
	}{
		{"dt", "2015-07-15", true, "dt=2015-07-15"},
		{"hm", "08:00", true, "hm=08%3A00"},
		{"k", "", true, "k=__HIVE_DEFAULT_PARTITION__"},
		{"k", "x", false, "k=__HIVE_DEFAULT_PARTITION__"},
		{"a=b", "c/d", true, "a%3Db=c%2Fd"},
	} {
		if got := HivePartitionSegment(tt.col, tt.val, tt.valid); got != tt.want {
			t.Errorf("HivePartitionSegment(%q, %q, %v) = %q, want %q", tt.col, tt.val, tt.valid, got, tt.want)
		}
	}
}

func TestKeyKindString(t *testing.T) {
	want := map[KeyKind]string{KeyOther: "other", KeyLatest: "latest", KeyGeneration: "generation",
		KeyManifest: "manifest", KeyState: "state", KeySource: "source", KeyKind(99): "other"}
	for k, s := range want {
		if k.String() != s {
			t.Errorf("%d.String() = %q, want %q", int(k), k.String(), s)
		}
	}
}
