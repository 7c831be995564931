//go:build !unix

package store

import "errors"

// lockFile is not implemented without flock(2): file:// conditional writes
// would not be atomic across processes, so they fail instead.
func lockFile(name string) (unlock func(), err error) {
	return nil, errors.New("file:// stores need flock(2), available on unix only")
}
