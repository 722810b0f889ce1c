package seed

import "bytes"

// Stage is the Stage of the seed build's progress reports.
const Stage = "seed build cache"

// packageCounter is a build step's stdout and stderr: it calls onPackage
// for every line that names a package in want (go build -v prints each
// package it compiles) and keeps the last 4 KiB for error messages.
type packageCounter struct {
	want      map[string]bool
	seen      map[string]bool
	onPackage func()
	partial   []byte
	last      []byte
}

func (c *packageCounter) Write(p []byte) (int, error) {
	c.last = append(c.last, p...)
	if len(c.last) > 4096 {
		c.last = c.last[len(c.last)-4096:]
	}
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		if line := string(bytes.TrimSpace(c.partial[:i])); c.want[line] && !c.seen[line] {
			if c.seen == nil {
				c.seen = map[string]bool{}
			}
			c.seen[line] = true
			c.onPackage()
		}
		c.partial = c.partial[i+1:]
	}
	return len(p), nil
}

func (c *packageCounter) tail() []byte { return c.last }
