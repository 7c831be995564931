package manifest

import (
	"testing"
)

func TestChecksum(t *testing.T) {
	// sha256("") and sha256("abc") from FIPS 180-2.
	tests := map[string]string{
		"":    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	}
	for in, want := range tests {
		if got := Checksum([]byte(in)); got != want {
			t.Errorf("Checksum(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestVerifyFile(t *testing.T) {
	data := []byte("state bytes")
	ref := NewFileRef("gen=000001/epoch=0000000001/x/op=w/s=0000.parquet", data)
	if err := VerifyFile(ref, data); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	flipped := append([]byte{}, data...)
	flipped[0] ^= 1
	badSum := ref
	badSum.Checksum = "sha256:abc"
	tests := []struct {
		name string
		ref  FileRef
		data []byte
		frag []string
	}{
		{"truncated", ref, data[:5], []string{"size mismatch", "records 11 bytes, read 5"}},
		{"bit flip", ref, flipped, []string{"checksum mismatch", ref.Checksum, Checksum(flipped)}},
		{"invalid recorded checksum", badSum, data, []string{"invalid checksum"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyFile(tt.ref, tt.data)
			wantFieldErr(t, err, "", append([]string{"file " + ref.Path + ": "}, tt.frag...)...)
		})
	}
}
