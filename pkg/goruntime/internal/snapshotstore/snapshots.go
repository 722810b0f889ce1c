package snapshotstore

import (
	"maps"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
)

// Snapshot is the record as the library's callers see it.
func (m Meta) Snapshot() goruntime.Snapshot {
	return goruntime.Snapshot{ID: m.ID, Owner: m.Owner, Labels: maps.Clone(m.Labels), Created: m.Created.UTC(),
		Expires: m.Expires.UTC(), Bytes: m.Bytes, Method: m.Method}
}

// Snapshots prunes what expired, then returns owner's live snapshots,
// oldest first: a backend's ListSnapshots.
func (s Store) Snapshots(owner string) ([]goruntime.Snapshot, error) {
	if _, err := s.Prune(); err != nil {
		return nil, err
	}
	ms, err := s.List(owner)
	if err != nil {
		return nil, err
	}
	out := make([]goruntime.Snapshot, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Snapshot())
	}
	goruntime.SortSnapshots(out)
	return out, nil
}
