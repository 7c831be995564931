package manifest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// bigManifest has 4 operators at parallelism 128 and 10,000 inline keys.
func bigManifest() *Manifest {
	m := validManifest()
	m.Operators = nil
	for op := 0; op < 4; op++ {
		id := fmt.Sprintf("op-%d", op)
		var files []FileRef
		for s := 0; s < 128; s++ {
			files = append(files, stateRef(id, s, s, s+1))
			files[s].Path = StatePath(3, 41, attemptA, id, s)
		}
		m.Operators = append(m.Operators, OperatorState{ID: id, Files: files})
	}
	m.Source.Inline = nil
	for i := 0; i < 10000; i++ {
		m.Source.Inline = append(m.Source.Inline, fmt.Sprintf("events/2026/11/29/%06d.jsonl", i))
	}
	m.Source.Count = 10000
	return m
}

func BenchmarkDecodeManifest(b *testing.B) {
	for _, c := range []struct {
		name string
		m    *Manifest
	}{{"small", validManifest()}, {"big", bigManifest()}} {
		data, err := EncodeManifest(c.m)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := DecodeManifest("x", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeManifest(b *testing.B) {
	m := bigManifest()
	for b.Loop() {
		if _, err := EncodeManifest(m); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeAdversarialIsFast guards against inputs that make the strict
// decoder slow or deeply recursive.
func TestDecodeAdversarialIsFast(t *testing.T) {
	inputs := map[string]string{
		"deep unknown field":  `{"x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `,"format_version":1}`,
		"deep before version": `{"x":` + strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000) + `}`,
		"many fields":         "{" + strings.Repeat(`"a":1,`, 100000) + `"format_version":1}`,
		"huge string":         `{"format_version":1,"pipeline":"` + strings.Repeat("a", 1<<20) + `"}`,
	}
	for name, in := range inputs {
		start := time.Now()
		if _, err := DecodeManifest("x", []byte(in)); err == nil {
			t.Errorf("%s: decoded", name)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
}
