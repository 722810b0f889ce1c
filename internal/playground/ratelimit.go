package playground

import (
	"sync"
	"time"
)

// rateLimiter is a token bucket per client: each holds up to perMinute
// tokens, refilled at perMinute a minute; a request takes one.
type rateLimiter struct {
	perMinute int

	mu      sync.Mutex
	buckets map[string]*bucket
	pruneAt int // prune full buckets when this many are kept
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was counted
}

// minPrune is the fewest buckets kept before full ones are pruned.
const minPrune = 1024

func newRateLimiter(perMinute int) *rateLimiter {
	return &rateLimiter{perMinute: perMinute, buckets: map[string]*bucket{}, pruneAt: minPrune}
}

// take takes one of client's tokens at now; without one it returns false
// and how long until one is there.
func (l *rateLimiter) take(client string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[client]
	if b == nil {
		if len(l.buckets) >= l.pruneAt {
			l.prune(now)
		}
		b = &bucket{tokens: float64(l.perMinute), at: now}
		l.buckets[client] = b
	}
	b.tokens = l.refilled(b, now)
	b.at = now
	if b.tokens < 1 {
		wait := time.Duration((1 - b.tokens) * float64(time.Minute) / float64(l.perMinute))
		return false, wait
	}
	b.tokens--
	return true, 0
}

// refilled is b's tokens at now.
func (l *rateLimiter) refilled(b *bucket, now time.Time) float64 {
	t := b.tokens + now.Sub(b.at).Minutes()*float64(l.perMinute)
	return min(t, float64(l.perMinute))
}

// prune forgets the buckets full at now (a new one starts full: nothing
// is lost) and sets when to prune next.
func (l *rateLimiter) prune(now time.Time) {
	for c, b := range l.buckets {
		if l.refilled(b, now) >= float64(l.perMinute) {
			delete(l.buckets, c)
		}
	}
	l.pruneAt = max(minPrune, 2*len(l.buckets))
}
