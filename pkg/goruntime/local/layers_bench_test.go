package local_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// BenchmarkLayersVsBare runs, side by side in one process and alternating
// every iteration, the same work on a backend with every protection
// (seccomp filter, nested user namespace block, host uid, disk quota)
// and on one with all of them relaxed, neither with a warm pool: Open
// (the whole start path, until the server answers),
// then the first `go run main.go` in that fresh sandbox. It reports p50
// of each and the ratios layered/bare (target <= 1.2).
//
//	go test -run '^$' -bench LayersVsBare -benchtime 10x ./pkg/goruntime/local/
func BenchmarkLayersVsBare(b *testing.B) {
	// No warm pool for either: Open then is the whole start path, where
	// the layers are set up (with a pool it is a claim of a sandbox
	// started earlier).
	layeredOpts, bareOpts := testOptions(), testOptions()
	layeredOpts.WarmPool, bareOpts.WarmPool = -1, -1
	bareOpts.Relax = local.Relax{Seccomp: true, NestedUserns: true, HostUID: true, DiskQuota: true}
	backends := []*local.Backend{newBackend(b, layeredOpts), newBackend(b, bareOpts)}
	ctx := context.Background()
	open := make([][]time.Duration, 2)
	first := make([][]time.Duration, 2)
	once := func(i int) {
		start := time.Now()
		s, err := goruntime.Open(ctx, backends[i], goruntime.Options{})
		if err != nil {
			b.Fatal(err)
		}
		open[i] = append(open[i], time.Since(start))
		defer s.Close(ctx)
		mustOK(b, s, goruntime.Request{Files: helloFiles})
		start = time.Now()
		mustOK(b, s, goruntime.Request{Command: "go run main.go"})
		first[i] = append(first[i], time.Since(start))
	}
	// Warm both (spare caches and disks, staged binds) before measuring.
	once(0)
	once(1)
	open, first = make([][]time.Duration, 2), make([][]time.Duration, 2)
	for b.Loop() {
		once(0)
		once(1)
		time.Sleep(time.Second) // let both refill their spares, as between real requests
	}
	p50 := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if len(open[0]) == 0 {
		return
	}
	b.ReportMetric(ms(p50(open[0])), "p50-open-layered-ms")
	b.ReportMetric(ms(p50(open[1])), "p50-open-bare-ms")
	b.ReportMetric(float64(p50(open[0]))/float64(p50(open[1])), "open-ratio")
	b.ReportMetric(ms(p50(first[0])), "p50-first-run-layered-ms")
	b.ReportMetric(ms(p50(first[1])), "p50-first-run-bare-ms")
	b.ReportMetric(float64(p50(first[0]))/float64(p50(first[1])), "first-run-ratio")
}
