package epoch_test

import "testing"

func s3Backend(t testing.TB) backend {
	return fileBackend() // TODO replaced once internal/s3test lands
}
