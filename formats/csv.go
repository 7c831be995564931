package formats

import "github.com/apache/arrow-go/v18/arrow"

// decodeCSV decodes a CSV file: decodeCSVStream (stream_decode.go),
// collecting the batches.
func decodeCSV(file string, data []byte, opts DecodeOptions) (*Decoded, error) {
	var batches []arrow.RecordBatch
	d, err := decodeCSVStream(file, data, opts, func(b arrow.RecordBatch) error {
		batches = append(batches, b)
		return nil
	})
	if err != nil {
		releaseAll(batches)
		return nil, err
	}
	d.Batches = batches
	return d, nil
}
