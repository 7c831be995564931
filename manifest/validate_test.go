package manifest

import (
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/keygroup"
)

func TestValidateRef(t *testing.T) {
	tests := []struct {
		ref      string
		absolute bool
		wantErr  string // fragment; "" means valid
	}{
		{"gen=000003/epoch=0000000041/x/op=w/s=0000.parquet", false, ""},
		{"a", false, ""},
		{"dt=2026-11-29/part.parquet", false, ""},
		{"a:b/c", false, ""},
		{"s3://bucket/prefix/f.parquet", true, ""},
		{"s3://bucket/prefix/f.parquet?endpoint=http://127.0.0.1:9000", true, ""},
		{"file:///var/floe/savepoints/x/f.parquet", true, ""},
		{"gs://b/o", true, ""},
		{"", true, "empty path"},
		{"../x", true, "escapes the pipeline root"},
		{"a/../../x", false, "escapes the pipeline root"},
		{"a/..", false, "escapes the pipeline root"},
		{"/abs/x", true, "absolute path"},
		{"./x", false, `"." segment`},
		{"a/./x", false, `"." segment`},
		{"a//x", false, "empty path segment"},
		{"a/", false, "empty path segment"},
		{`a\x`, true, "backslash"},
		{"a\x00b", false, "control character"},
		{"a\nb", false, "control character"},
		{"a\xffb", false, "not valid UTF-8"},
		{strings.Repeat("a", MaxRefLen+1), false, "longer than"},
		{"s3://bucket/f", false, "absolute URL"},
		{"s3://bucket/", true, "names a bucket"},
		{"s3://bucket", true, "names a bucket"},
		{"file://", true, "names no object"},
		{"s3://bucket/a/../b", true, "escapes the pipeline root"},
		{"s3://bucket//b", true, "empty path segment"},
		{"s3://user@bucket/b", true, "not a plain object URL"},
		{"s3://bucket/b#frag", true, "not a plain object URL"},
		{"s3://bu cket/b", true, "not a valid URL"},
	}
	for _, tt := range tests {
		err := ValidateRef(tt.ref, tt.absolute)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("ValidateRef(%q, %v) = %v, want nil", tt.ref, tt.absolute, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("ValidateRef(%q, %v) = nil, want error containing %q", tt.ref, tt.absolute, tt.wantErr)
			continue
		}
		wantFieldErr(t, err, "", tt.wantErr)
	}
}

func TestValidateIdentifiers(t *testing.T) {
	tests := []struct {
		name  string
		check func(string) error
		in    string
		valid bool
	}{
		{"op id", ValidateOpID, "window-0_a", true},
		{"op id max len", ValidateOpID, strings.Repeat("a", MaxOpIDLen), true},
		{"op id too long", ValidateOpID, strings.Repeat("a", MaxOpIDLen+1), false},
		{"op id empty", ValidateOpID, "", false},
		{"op id upper", ValidateOpID, "Window", false},
		{"op id slash", ValidateOpID, "a/b", false},
		{"op id dots", ValidateOpID, "..", false},
		{"op id space", ValidateOpID, "a b", false},
		{"attempt", ValidateAttempt, attemptA, true},
		{"attempt upper", ValidateAttempt, strings.ToUpper(attemptA), false},
		{"attempt braces", ValidateAttempt, "{" + attemptA + "}", false},
		{"attempt no dashes", ValidateAttempt, strings.ReplaceAll(attemptA, "-", ""), false},
		{"attempt misplaced dash", ValidateAttempt, "0f8fad5bd-9cb-469f-a165-70867728950e", false},
		{"attempt empty", ValidateAttempt, "", false},
		{"checksum", ValidateChecksum, Checksum(nil), true},
		{"checksum upper", ValidateChecksum, strings.ToUpper(Checksum(nil)), false},
		{"checksum md5", ValidateChecksum, "md5:d41d8cd98f00b204e9800998ecf8427e", false},
		{"checksum short", ValidateChecksum, Checksum(nil)[:70], false},
		{"checksum bare hex", ValidateChecksum, Checksum(nil)[7:], false},
		{"pipeline", ValidatePipelineName, "Clicks.per-user_2", true},
		{"pipeline empty", ValidatePipelineName, "", false},
		{"pipeline dot", ValidatePipelineName, ".hidden", false},
		{"pipeline dotdot", ValidatePipelineName, "..", false},
		{"pipeline slash", ValidatePipelineName, "a/b", false},
		{"pipeline too long", ValidatePipelineName, strings.Repeat("p", MaxNameLen+1), false},
	}
	for _, tt := range tests {
		err := tt.check(tt.in)
		if tt.valid && err != nil {
			t.Errorf("%s: %q: unexpected error %v", tt.name, tt.in, err)
		}
		if !tt.valid {
			if err == nil {
				t.Errorf("%s: %q: no error", tt.name, tt.in)
			} else {
				wantFieldErr(t, err, "")
			}
		}
	}
}

func TestValidFixtures(t *testing.T) {
	if err := validLatest().Validate(); err != nil {
		t.Errorf("latest: %v", err)
	}
	if err := validGeneration().Validate(); err != nil {
		t.Errorf("generation: %v", err)
	}
	if err := validManifest().Validate(); err != nil {
		t.Errorf("manifest: %v", err)
	}
}

func TestLatestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Latest)
		field  string
		frag   string
	}{
		{"version", func(l *Latest) { l.FormatVersion = 3 }, "format_version", "unsupported format version 3"},
		{"zero generation", func(l *Latest) { l.Generation = 0 }, "generation", "must be >= 1"},
		{"negative epoch", func(l *Latest) { l.Epoch = -1 }, "epoch", "must be >= 1"},
		{"manifest mismatch", func(l *Latest) { l.Manifest = ManifestPath(3, 40) }, "manifest", "does not match"},
		{"manifest unpadded", func(l *Latest) { l.Manifest = "gen=3/epoch=41/_manifest.json" }, "manifest", "does not match"},
		{"attempt", func(l *Latest) { l.Attempt = "x" }, "attempt", "not a canonical lowercase UUID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := validLatest()
			tt.mutate(l)
			wantFieldErr(t, l.Validate(), tt.field, "latest pointer: field "+tt.field, tt.frag)
		})
	}
}

func TestGenerationValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Generation)
		field  string
		frag   string
	}{
		{"version", func(g *Generation) { g.FormatVersion = 0 }, "format_version", "unsupported"},
		{"pipeline", func(g *Generation) { g.Pipeline = "a/b" }, "pipeline", "may hold only"},
		{"generation", func(g *Generation) { g.Generation = 0 }, "generation", ">= 1"},
		{"parent epoch", func(g *Generation) { g.Parent.Epoch = 0 }, "parent.epoch", ">= 1"},
		{"parent same generation", func(g *Generation) { g.Parent.Generation = 3 }, "parent.generation", "older than generation 3"},
		{"parallelism", func(g *Generation) { g.Parallelism = 0 }, "parallelism", ">= 1"},
		{"max parallelism", func(g *Generation) { g.MaxParallelism = 0 }, "max_parallelism", ">= 1"},
		{"max parallelism limit", func(g *Generation) { g.MaxParallelism = keygroup.Max + 1 }, "max_parallelism", "key-group limit"},
		{"parallelism above max", func(g *Generation) { g.Parallelism = 129 }, "parallelism", "exceeds max_parallelism 128"},
		{"op id", func(g *Generation) { g.Plan[1].ID = "Bad" }, "plan[1].id", "may hold only"},
		{"duplicate op", func(g *Generation) { g.Plan[1].ID = g.Plan[0].ID }, "plan[1].id", "also plan[0]"},
		{"op kind", func(g *Generation) { g.Plan[0].Kind = "" }, "plan[0].kind", "empty"},
		{"state schema", func(g *Generation) { g.Plan[0].StateSchema = "" }, "plan[0].state_schema", "empty"},
		{"plan hash", func(g *Generation) { g.PlanHash = "" }, "plan_hash", "empty"},
		{"attempt", func(g *Generation) { g.Attempt = "" }, "attempt", "UUID"},
		{"created", func(g *Generation) { g.CreatedAt = time.Time{} }, "created_at", "zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := validGeneration()
			tt.mutate(g)
			wantFieldErr(t, g.Validate(), tt.field, "generation: field "+tt.field, tt.frag)
		})
	}
	g := validGeneration()
	g.Parent, g.Plan = nil, nil
	if err := g.Validate(); err != nil {
		t.Errorf("fresh generation without parent or plan: %v", err)
	}
}

func TestManifestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Manifest)
		field  string
		frag   string
	}{
		{"version", func(m *Manifest) { m.FormatVersion = 3 }, "format_version", "unsupported format version 3"},
		{"pipeline", func(m *Manifest) { m.Pipeline = "" }, "pipeline", "1 to 128"},
		{"generation", func(m *Manifest) { m.Generation = 0 }, "generation", ">= 1"},
		{"epoch", func(m *Manifest) { m.Epoch = -5 }, "epoch", ">= 1"},
		{"attempt", func(m *Manifest) { m.Attempt = "nope" }, "attempt", "UUID"},
		{"parent epoch equal", func(m *Manifest) { m.Parent.Epoch = 41 }, "parent.epoch", "older than epoch 41"},
		{"parent epoch newer", func(m *Manifest) { m.Parent.Epoch = 42 }, "parent.epoch", "older"},
		{"parent generation newer", func(m *Manifest) { m.Parent.Generation = 4 }, "parent.generation", "newer than generation 3"},
		{"parent generation zero", func(m *Manifest) { m.Parent.Generation = 0 }, "parent.generation", ">= 1"},
		{"created", func(m *Manifest) { m.CreatedAt = time.Time{} }, "created_at", "zero"},
		{"inline empty", func(m *Manifest) { m.Source.Inline[1] = "" }, "source.inline[1]", "empty key"},
		{"inline duplicate", func(m *Manifest) { m.Source.Inline[1] = m.Source.Inline[0] }, "source.inline[1]", "also source.inline[0]"},
		{"count negative", func(m *Manifest) { m.Source.Count = -1 }, "source.count", ">= 0"},
		{"count below inline", func(m *Manifest) { m.Source.Count = 1 }, "source.count", "less than the 2 inline keys"},
		{"segment escapes", func(m *Manifest) { m.Source.Segments[0].Path = "../x" }, "source.segments[0].path", "escapes"},
		{"segment kind", func(m *Manifest) { m.Source.Segments[0].Kind = "late" }, "source.segments[0].kind", "only allowed on side outputs"},
		{"segment range reversed", func(m *Manifest) { m.Source.Segments[0].First, m.Source.Segments[0].Last = "b", "a" },
			"source.segments[0].first", "first <= last"},
		{"segment range half", func(m *Manifest) { m.Source.Segments[0].Last = "a" }, "source.segments[0].first", "both set"},
		{"range off a segment", func(m *Manifest) { m.Operators[0].Files[0].First, m.Operators[0].Files[0].Last = "a", "b" },
			"operators[0].files[0].first", "only allowed on log segments"},
		{"input name", func(m *Manifest) { m.Source.Inputs[""] = InputState{} }, "source.inputs", "empty input name"},
		{"counter", func(m *Manifest) { m.Counters.RowsLate = -1 }, "counters.rows_late", ">= 0"},
		{"windows counter", func(m *Manifest) { m.Counters.Windows = -1 }, "counters.windows_emitted", ">= 0"},
		{"op id", func(m *Manifest) { m.Operators[0].ID = "" }, "operators[0].id", "1 to 64"},
		{"op duplicate", func(m *Manifest) { m.Operators[1].ID = "window-0" }, "operators[1].id", "also operators[0]"},
		{"state path escapes", func(m *Manifest) { m.Operators[0].Files[1].Path = "../x" }, "operators[0].files[1].path",
			`manifest: field operators[0].files[1].path: "../x" escapes the pipeline root`},
		{"state path absolute", func(m *Manifest) { m.Operators[0].Files[1].Path = "/x" }, "operators[0].files[1].path", "absolute path"},
		{"state path dot", func(m *Manifest) { m.Operators[0].Files[1].Path = "./x" }, "operators[0].files[1].path", `"." segment`},
		{"state path empty segment", func(m *Manifest) { m.Operators[0].Files[1].Path = "a//x" }, "operators[0].files[1].path", "empty path segment"},
		{"state path backslash", func(m *Manifest) { m.Operators[0].Files[1].Path = `a\x` }, "operators[0].files[1].path", "backslash"},
		{"state size", func(m *Manifest) { m.Operators[0].Files[0].Size = -1 }, "operators[0].files[0].size", ">= 0"},
		{"state checksum", func(m *Manifest) { m.Operators[1].Files[0].Checksum = "sha256:abc" }, "operators[1].files[0].checksum", "64 lowercase hex"},
		{"state rows", func(m *Manifest) { m.Operators[0].Files[0].Rows = -1 }, "operators[0].files[0].rows", ">= 0"},
		{"state subtask", func(m *Manifest) { m.Operators[0].Files[0].Subtask = -1 }, "operators[0].files[0].subtask", ">= 0"},
		{"state no range", func(m *Manifest) { m.Operators[0].Files[0].KeyGroupHi = 0 }, "operators[0].files[0].kg_lo", "0 <= kg_lo < kg_hi"},
		{"state empty range", func(m *Manifest) { m.Operators[0].Files[1].KeyGroupLo = 128 }, "operators[0].files[1].kg_lo", "0 <= kg_lo < kg_hi"},
		{"state negative lo", func(m *Manifest) { m.Operators[0].Files[0].KeyGroupLo = -1 }, "operators[0].files[0].kg_lo", "0 <= kg_lo"},
		{"state hi limit", func(m *Manifest) { m.Operators[0].Files[1].KeyGroupHi = keygroup.Max + 1 }, "operators[0].files[1].kg_hi", "key-group limit"},
		{"state duplicate subtask", func(m *Manifest) { m.Operators[0].Files[1].Subtask = 0 }, "operators[0].files[1].subtask", "also operators[0].files[0]"},
		{"state overlap", func(m *Manifest) { m.Operators[0].Files[1].KeyGroupLo = 63 }, "operators[0].files[1].kg_lo", "overlaps operators[0].files[0] [0, 64)"},
		{"state duplicate path", func(m *Manifest) { m.Operators[0].Files[1].Path = m.Operators[0].Files[0].Path }, "operators[0].files[1].path", "also operators[0].files[0]"},
		{"state kind", func(m *Manifest) { m.Operators[0].Files[0].Kind = "late" }, "operators[0].files[0].kind", "only allowed"},
		{"output url", func(m *Manifest) { m.Outputs[0].Path = "s3://b/o" }, "outputs[0].path", "absolute URL"},
		{"output kind", func(m *Manifest) { m.Outputs[0].Kind = "late" }, "outputs[0].kind", "only allowed"},
		{"output range", func(m *Manifest) { m.Outputs[0].KeyGroupHi = -3 }, "outputs[0].kg_lo", "kg_lo < kg_hi"},
		{"side kind", func(m *Manifest) { m.SideOutputs[0].Kind = "" }, "side_outputs[0].kind", `must be "late" or "rejected"`},
		{"side checksum", func(m *Manifest) { m.SideOutputs[0].Checksum = "" }, "side_outputs[0].checksum", "sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validManifest()
			tt.mutate(m)
			wantFieldErr(t, m.Validate(), tt.field, "manifest: field "+tt.field, tt.frag)
		})
	}
}

func TestManifestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Manifest)
	}{
		{"first epoch", func(m *Manifest) { m.Parent = nil; m.Epoch = 1 }},
		{"parent in older generation", func(m *Manifest) { m.Parent = &Ref{Generation: 1, Epoch: 7} }},
		{"claimed savepoint state", func(m *Manifest) { m.Operators[0].Files[0].Path = "s3://b/savepoints/x/s=0000.parquet" }},
		{"side output url", func(m *Manifest) { m.SideOutputs[0].Path = "file:///var/late/x.parquet" }},
		{"rejected side output", func(m *Manifest) { m.SideOutputs[0].Kind = SideOutputRejected }},
		{"no watermark", func(m *Manifest) { m.Watermark, m.Operators[0].EmittedThrough = NoWatermark, NoWatermark }},
		{"empty lists", func(m *Manifest) {
			m.Operators, m.Outputs, m.SideOutputs, m.Source = nil, nil, nil, SourceState{}
		}},
		{"unordered state files", func(m *Manifest) {
			f := m.Operators[0].Files
			f[0], f[1] = f[1], f[0]
		}},
	}
	for _, tt := range tests {
		m := validManifest()
		tt.mutate(m)
		if err := m.Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestCheckGeneration(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Manifest, *Generation)
		field  string // "" means consistent
	}{
		{"consistent", func(*Manifest, *Generation) {}, ""},
		{"pipeline", func(m *Manifest, _ *Generation) { m.Pipeline = "other" }, "pipeline"},
		{"generation", func(_ *Manifest, g *Generation) { g.Generation = 4 }, "generation"},
		{"operator count", func(m *Manifest, _ *Generation) { m.Operators = m.Operators[:1] }, "operators"},
		{"operator order", func(m *Manifest, _ *Generation) { m.Operators[0], m.Operators[1] = m.Operators[1], m.Operators[0] }, "operators[0].id"},
		{"missing subtask file", func(m *Manifest, _ *Generation) { m.Operators[1].Files = m.Operators[1].Files[:1] }, "operators[1].files"},
		{"rescaled generation", func(_ *Manifest, g *Generation) { g.Parallelism = 4 }, "operators[0].files"},
		{"wrong range", func(m *Manifest, _ *Generation) {
			m.Operators[0].Files[0].KeyGroupHi = 60
			m.Operators[0].Files[1].KeyGroupLo = 60
		}, "operators[0].files[0].kg_lo"},
		{"subtask out of range", func(m *Manifest, _ *Generation) { m.Operators[0].Files[1].Subtask = 2 }, "operators[0].files[1].subtask"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, g := validManifest(), validGeneration()
			tt.mutate(m, g)
			err := m.CheckGeneration(g)
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantFieldErr(t, err, tt.field)
		})
	}
}
