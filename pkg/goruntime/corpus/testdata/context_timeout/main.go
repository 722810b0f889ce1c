// A slow operation cancelled by a context deadline, and a fast one that
// finishes in time.
package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

func work(ctx context.Context, d time.Duration) (string, error) {
	select {
	case <-time.After(d):
		return fmt.Sprintf("finished after %v", d), nil
	case <-ctx.Done():
		return "", fmt.Errorf("work(%v): %w", d, ctx.Err())
	}
}

func main() {
	for _, d := range []time.Duration{10 * time.Millisecond, 2 * time.Second} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		res, err := work(ctx, d)
		cancel()
		fmt.Println(res, err, errors.Is(err, context.DeadlineExceeded))
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("user pressed stop"))
	<-ctx.Done()
	fmt.Println(ctx.Err(), context.Cause(ctx))
}
