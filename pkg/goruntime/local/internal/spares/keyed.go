package spares

import (
	"context"
	"errors"
	"sync"
)

// Keyed is a Pool per key, made on first use: spares made for one key
// (a seed, say) are not taken for another. Its methods are safe for
// concurrent use.
type Keyed[K comparable, T any] struct {
	newPool func(key K) *Pool[T]

	mu     sync.Mutex
	closed bool
	pools  map[K]*Pool[T]
}

// NewKeyed returns an empty Keyed whose pools newPool makes.
func NewKeyed[K comparable, T any](newPool func(key K) *Pool[T]) *Keyed[K, T] {
	return &Keyed[K, T]{newPool: newPool, pools: map[K]*Pool[T]{}}
}

// Fill fills key's pool to n (Pool.Fill); nothing once closed.
func (k *Keyed[K, T]) Fill(key K, n int) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	p, ok := k.pools[key]
	if !ok {
		p = k.newPool(key)
		k.pools[key] = p
	}
	k.mu.Unlock()
	p.Fill(n)
}

// Close closes every pool (Pool.Close); later Fills do nothing.
func (k *Keyed[K, T]) Close(ctx context.Context) error {
	k.mu.Lock()
	k.closed = true
	pools := k.pools
	k.pools = map[K]*Pool[T]{}
	k.mu.Unlock()
	var errs []error
	for _, p := range pools {
		errs = append(errs, p.Close(ctx))
	}
	return errors.Join(errs...)
}
