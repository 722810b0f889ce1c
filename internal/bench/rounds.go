package bench

import "time"

// interleaved runs n rounds of every step in turn (one of each per
// round), so that load on the machine falls on all of them alike, and
// returns each step's samples. One warm-up round is not counted.
func interleaved(n int, steps ...func() (time.Duration, error)) ([]durations, error) {
	return rounds(n, false, steps)
}

// alternated is interleaved with the order of the steps reversed every
// other round (ABBA...), so that no step always runs right after another
// one: whatever a step leaves behind (a refill, a warm page cache, a
// busier CPU) falls on each of the others alike.
func alternated(n int, steps ...func() (time.Duration, error)) ([]durations, error) {
	return rounds(n, true, steps)
}

// rounds runs one warm-up round and n counted rounds of steps, reversing
// their order in odd rounds when alternate is set.
func rounds(n int, alternate bool, steps []func() (time.Duration, error)) ([]durations, error) {
	out := make([]durations, len(steps))
	for round := -1; round < n; round++ {
		for k := range steps {
			i := k
			if alternate && round%2 != 0 {
				i = len(steps) - 1 - k
			}
			d, err := steps[i]()
			if err != nil {
				return nil, err
			}
			if round >= 0 {
				out[i] = append(out[i], d)
			}
		}
	}
	return out, nil
}

// added is each round's a minus b (samples of one interleaved run).
func added(a, b durations) durations {
	out := make(durations, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] - b[i]
	}
	return out
}
