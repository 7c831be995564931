package main

import (
	"context"
	"os"
	"strings"
	"sync"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/store"
)

// pauseEnv, set in the environment of a re-executed floe to
// "sub1,sub2,...", makes that process stop itself with SIGSTOP just before
// its first Put to the state store of a key containing every substring: a
// pause point at an exact step of the protocol (before a given exchange
// object, part record or manifest of a given epoch), for the fencing tests.
// The test sees the process stopped (processStopped) and resumes it with
// SIGCONT; the Put then runs as it would have.
const pauseEnv = "FLOE_TEST_PAUSE_BEFORE_PUT"

// installPauseHook sets testWrapStore from pauseEnv (nothing when unset).
func installPauseHook() {
	v := os.Getenv(pauseEnv)
	if v == "" {
		return
	}
	subs := strings.Split(v, ",")
	once := &sync.Once{}
	testWrapStore = func(name string, s engine.Store) engine.Store {
		if name != "state" {
			return s
		}
		return &pauseStore{Store: s, subs: subs, once: once}
	}
}

// pauseStore stops the process before the first Put matching subs.
type pauseStore struct {
	store.Store
	subs []string
	once *sync.Once
}

func (p *pauseStore) Put(ctx context.Context, key string, data []byte, opts store.PutOptions) (string, error) {
	match := true
	for _, s := range p.subs {
		match = match && strings.Contains(key, s)
	}
	if match {
		p.once.Do(stopSelf)
	}
	return p.Store.Put(ctx, key, data, opts)
}

// ReadRange keeps the exchange's ranged reads ranged through the wrapper.
func (p *pauseStore) ReadRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	return store.ReadRange(ctx, p.Store, key, offset, length)
}
