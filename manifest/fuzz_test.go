package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fuzzRoundTrip is the property shared by the decoders: decoding never
// panics, and whatever decodes re-encodes (it passed Validate) to bytes that
// decode to an equal value and re-encode to the same bytes.
func fuzzRoundTrip[T any](t *testing.T, data []byte,
	decode func(string, []byte) (*T, error), encode func(*T) ([]byte, error)) {
	v, err := decode("fuzz", data)
	if err != nil {
		if v != nil {
			t.Fatalf("non-nil value with error %v", err)
		}
		return
	}
	enc, err := encode(v)
	if err != nil {
		t.Fatalf("decoded value does not encode: %v\ninput: %q", err, data)
	}
	v2, err := decode("fuzz", enc)
	if err != nil {
		t.Fatalf("re-decode: %v\nencoded: %s", err, enc)
	}
	if !reflect.DeepEqual(v, v2) {
		t.Fatalf("round trip changed the value:\n%+v\n%+v", v, v2)
	}
	enc2, err := encode(v2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, enc2) {
		t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
	}
}

func addSeeds(f *testing.F, golden string, extra ...[]byte) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "v1", golden))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	for _, e := range extra {
		f.Add(e)
	}
	f.Add([]byte(`{"format_version":1}`))
	f.Add([]byte(`{"format_version":2,"x":1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
}

func FuzzDecodeManifest(f *testing.F) {
	m := validManifest()
	m.Parent, m.Operators, m.Outputs, m.SideOutputs = nil, nil, nil, nil
	small, _ := EncodeManifest(m)
	addSeeds(f, "manifest.json", small)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, DecodeManifest, EncodeManifest)
	})
}

func FuzzDecodeLatest(f *testing.F) {
	addSeeds(f, "latest.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, DecodeLatest, EncodeLatest)
	})
}

func FuzzDecodeGeneration(f *testing.F) {
	g := validGeneration()
	g.Parent, g.Plan = nil, nil
	small, _ := EncodeGeneration(g)
	addSeeds(f, "generation.json", small)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, DecodeGeneration, EncodeGeneration)
	})
}

// FuzzParseKey checks that ParseKey never panics and that every state,
// manifest and generation key it recognises is the one the layout helpers
// build from the parsed fields.
func FuzzParseKey(f *testing.F) {
	for _, k := range []string{LatestPath, GenerationPath(3), ManifestPath(3, 41),
		StatePath(3, 41, attemptA, "w-1", 2), SourcePath(3, 41, attemptA, "a/b"), "gen=3/x"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		info, ok := ParseKey(key)
		if !ok {
			return
		}
		var rebuilt string
		switch info.Kind {
		case KeyLatest:
			rebuilt = LatestPath
		case KeyGeneration:
			rebuilt = GenerationPath(info.Generation)
		case KeyManifest:
			rebuilt = ManifestPath(info.Generation, info.Epoch)
		case KeyState:
			rebuilt = StatePath(info.Generation, info.Epoch, info.Attempt, info.OpID, info.Subtask)
		case KeySource:
			rebuilt = SourcePath(info.Generation, info.Epoch, info.Attempt, info.SourceName)
		default:
			return
		}
		if rebuilt != key {
			t.Fatalf("ParseKey(%q) = %+v, which rebuilds to %q", key, info, rebuilt)
		}
		if info.Kind != KeyLatest && info.Generation < 1 {
			t.Fatalf("ParseKey(%q): generation %d", key, info.Generation)
		}
		if err := ValidateRef(key, false); err != nil {
			t.Fatalf("recognised key %q is not a valid ref: %v", key, err)
		}
	})
}
