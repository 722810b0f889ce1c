package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

func meminfo() map[string]int64 {
	m := map[string]int64{}
	f, _ := os.Open("/proc/meminfo")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		v, _ := strconv.ParseInt(fs[1], 10, 64)
		m[strings.TrimSuffix(fs[0], ":")] = v
	}
	return m
}

func slabs() map[string]int64 {
	m := map[string]int64{}
	f, _ := os.Open("/proc/slabinfo")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[0] == "#" || fs[0] == "slabinfo" {
			continue
		}
		objs, _ := strconv.ParseInt(fs[2], 10, 64)
		size, _ := strconv.ParseInt(fs[3], 10, 64)
		m[fs[0]] += objs * size
	}
	return m
}

func main() {
	ctx := context.Background()
	if os.Args[1] == "net" {
		b, err := local.New(local.Options{ServerPath: os.Args[2], StateDir: "/var/tmp/bstate", Network: true, WarmPool: -1})
		if err != nil {
			panic(err)
		}
		s, err := b.Open(ctx)
		if err != nil {
			panic(err)
		}
		r, err := s.Exec(ctx, goruntime.ExecRequest{Command: "grep devpts /proc/mounts; ls /sys/class/net"})
		fmt.Println(r.Stdout, r.Stderr, err)
		s.Close(ctx)
		return
	}
	if os.Args[1] == "churn" {
		churn(ctx, os.Args[2])
		return
	}
	n, _ := strconv.Atoi(os.Args[1])
	b, err := local.New(local.Options{ServerPath: os.Args[2], StateDir: "/var/tmp/bstate", WarmPool: -1})
	if err != nil {
		panic(err)
	}
	// warm one
	s0, err := b.Open(ctx)
	if err != nil {
		panic(err)
	}
	s0.Close(ctx)
	time.Sleep(3 * time.Second)
	m0, s0m := meminfo(), slabs()
	var sbs []goruntime.Sandbox
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				s, err := b.Open(ctx)
				if err != nil {
					panic(err)
				}
				mu.Lock()
				sbs = append(sbs, s)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	time.Sleep(5 * time.Second)
	m1, s1m := meminfo(), slabs()
	fmt.Printf("per sandbox (KiB), n=%d\n", n)
	for _, k := range []string{"MemAvailable", "MemFree", "AnonPages", "Shmem", "Cached", "Buffers", "Slab", "SReclaimable", "SUnreclaim", "KernelStack", "PageTables", "Percpu", "VmallocUsed", "Mapped", "Inactive(file)", "Active(file)"} {
		fmt.Printf("%-16s %8.1f\n", k, float64(m1[k]-m0[k])/float64(n))
	}
	type kv struct {
		k string
		v int64
	}
	var top []kv
	for k, v := range s1m {
		if d := v - s0m[k]; d > 0 {
			top = append(top, kv{k, d})
		}
	}
	for i := range top {
		for j := i + 1; j < len(top); j++ {
			if top[j].v > top[i].v {
				top[i], top[j] = top[j], top[i]
			}
		}
	}
	for i := 0; i < 25 && i < len(top); i++ {
		fmt.Printf("slab %-28s %8.1f KiB\n", top[i].k, float64(top[i].v)/1024/float64(n))
	}
	st, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "Threads") {
			fmt.Println("opener", l)
		}
	}
	if len(os.Args) > 3 {
		fmt.Println("holding; pids:")
		time.Sleep(time.Hour)
	}
	for _, s := range sbs {
		s.Close(ctx)
	}
	b.Close(ctx)
}

func churn(ctx context.Context, server string) {
	b, err := local.New(local.Options{ServerPath: server, StateDir: "/var/tmp/bstate"})
	if err != nil {
		panic(err)
	}
	s0, _ := b.Open(ctx)
	s0.Close(ctx)
	time.Sleep(5 * time.Second)
	var n int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(20 * time.Second)
	t0 := time.Now()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				s, err := b.Open(ctx)
				if err != nil {
					panic(err)
				}
				s.Close(ctx)
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%d open+close in %v: %.1f/s\n", n, time.Since(t0), float64(n)/time.Since(t0).Seconds())
	b.Close(ctx)
}
