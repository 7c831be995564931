package engine

import (
	"context"
	"fmt"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// SavepointInfo describes one savepoint of a pipeline.
type SavepointInfo struct {
	Name       string `json:"name"`
	Complete   bool   `json:"complete"` // false: its creation was interrupted
	Generation int64  `json:"generation,omitempty"`
	Epoch      int64  `json:"epoch,omitempty"`
	Watermark  string `json:"watermark,omitempty"`
	Files      int    `json:"files,omitempty"`
	Bytes      int64  `json:"bytes,omitempty"`
	CreatedAt  string `json:"created_at,omitempty"`
	Claimed    bool   `json:"claimed"`
	URL        string `json:"url"`
}

func openForSavepoints(ctx context.Context, p *spec.Pipeline) (*stores, *epoch.Committer, *epoch.Head, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, nil, err
	}
	st, err := openStores(ctx, p, &Options{}, false)
	if err != nil {
		return nil, nil, nil, err
	}
	c := epoch.NewCommitter(st.state, st.sink, p.Name, nil)
	head, err := c.Peek(ctx)
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	return st, c, head, nil
}

// CreateSavepoint copies a committed epoch (0: the head) into the named
// savepoint under <state>/<pipeline>/savepoints/NAME/. It writes nothing
// else; a crash leaves an incomplete savepoint that the same command
// completes.
func CreateSavepoint(ctx context.Context, p *spec.Pipeline, name string, epochN int64) (*SavepointInfo, error) {
	return CreateSavepointTo(ctx, p, name, epochN, nil)
}

// CreateSavepointTo is CreateSavepoint writing through dst (nil: the named
// savepoint's folder), e.g. a store with injected faults.
func CreateSavepointTo(ctx context.Context, p *spec.Pipeline, name string, epochN int64, dst store.Store) (*SavepointInfo, error) {
	st, c, head, err := openForSavepoints(ctx, p)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if head.Manifest == nil {
		return nil, fmt.Errorf("savepoint %s: nothing is committed yet", name)
	}
	m := head.Manifest
	if epochN > 0 && epochN != m.Epoch {
		chain, err := c.Chain(ctx, head, int(head.Epoch()))
		if err != nil {
			return nil, err
		}
		m = nil
		var retained []int64
		for _, x := range chain {
			retained = append(retained, x.Epoch)
			if x.Epoch == epochN {
				m = x
			}
		}
		if m == nil {
			return nil, fmt.Errorf("savepoint %s: epoch %d is not retained (retained: %v)", name, epochN, retained)
		}
	}
	u, err := SavepointURL(p, name)
	if err != nil {
		return nil, err
	}
	if dst == nil {
		s, err := store.Open(ctx, u)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		dst = store.WithRetry(s, store.RetryPolicy{})
	}
	sp, err := c.CreateSavepoint(ctx, m, name, dst)
	if err != nil {
		return nil, err
	}
	return savepointInfo(epoch.SavepointInfo{Name: name, Savepoint: sp}, u), nil
}

func savepointInfo(s epoch.SavepointInfo, u string) *SavepointInfo {
	info := &SavepointInfo{Name: s.Name, Claimed: s.Claimed, URL: store.Redact(u)}
	if sp := s.Savepoint; sp != nil {
		info.Complete = true
		info.Generation, info.Epoch, info.Watermark = sp.Generation, sp.Epoch, fmtWM(sp.Watermark)
		info.Files, info.Bytes, info.CreatedAt = sp.Files, sp.Bytes, sp.CreatedAt.Format("2006-01-02T15:04:05Z07:00")
	}
	return info
}

// ListSavepoints lists the pipeline's named savepoints.
func ListSavepoints(ctx context.Context, p *spec.Pipeline) ([]SavepointInfo, error) {
	st, c, head, err := openForSavepoints(ctx, p)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	list, err := c.ListSavepoints(ctx, head, keepOf(p))
	if err != nil {
		return nil, err
	}
	out := []SavepointInfo{}
	for _, s := range list {
		u, _ := SavepointURL(p, s.Name)
		out = append(out, *savepointInfo(s, u))
	}
	return out, nil
}

// DeleteSavepoint deletes a named savepoint (refused while claimed).
func DeleteSavepoint(ctx context.Context, p *spec.Pipeline, name string) error {
	st, c, head, err := openForSavepoints(ctx, p)
	if err != nil {
		return err
	}
	defer st.Close()
	return c.DeleteSavepoint(ctx, head, keepOf(p), name)
}

func keepOf(p *spec.Pipeline) int {
	if p.State.RetainEpochs > 0 {
		return p.State.RetainEpochs
	}
	return spec.DefaultRetainEpochs
}
