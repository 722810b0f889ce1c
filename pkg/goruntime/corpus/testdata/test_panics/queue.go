// Package queue is a ring buffer whose Pop panics when empty.
package queue

// Ring is a fixed-size FIFO.
type Ring struct {
	buf        []int
	head, size int
}

// New returns a ring holding at most n items.
func New(n int) *Ring { return &Ring{buf: make([]int, n)} }

// Push adds v, reporting false when full.
func (r *Ring) Push(v int) bool {
	if r.size == len(r.buf) {
		return false
	}
	r.buf[(r.head+r.size)%len(r.buf)] = v
	r.size++
	return true
}

// Pop removes the oldest item.
func (r *Ring) Pop() int {
	v := r.buf[r.head] // bug: no emptiness check on a zero-size ring
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return v
}
