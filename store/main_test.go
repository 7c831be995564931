package store_test

import (
	"testing"

	"github.com/floe-dev/floe/internal/s3test"
)

func TestMain(m *testing.M) { s3test.Main(m) }
