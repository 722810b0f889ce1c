// Package store keeps item counts.
package store

import (
	"fmt"
	"sort"
)

// Store maps item names to counts.
type Store struct{ items map[string]int }

// New returns an empty store.
func New() *Store { return &Store{items: map[string]int{}} }

// Add changes an item's count, refusing to go below zero.
func (s *Store) Add(name string, n int) error {
	if s.items[name]+n < 0 {
		return fmt.Errorf("remove %d %s: only %d left", -n, name, s.items[name])
	}
	s.items[name] += n
	return nil
}

// Names returns the item names in order.
func (s *Store) Names() []string {
	names := make([]string, 0, len(s.items))
	for n := range s.items {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Count returns an item's count.
func (s *Store) Count(name string) int { return s.items[name] }
