// wc on stdin: lines, words, bytes, and the most frequent words.
package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode"
)

func main() {
	sc := bufio.NewScanner(os.Stdin)
	counts := map[string]int{}
	lines, words, bytes := 0, 0, 0
	for sc.Scan() {
		line := sc.Text()
		lines++
		bytes += len(line) + 1
		for _, w := range strings.FieldsFunc(line, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' }) {
			words++
			counts[strings.ToLower(w)]++
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "read stdin:", err)
		os.Exit(1)
	}
	fmt.Printf("lines=%d words=%d bytes=%d\n", lines, words, bytes)
	type kv struct {
		w string
		n int
	}
	var all []kv
	for w, n := range counts {
		all = append(all, kv{w, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].w < all[j].w
	})
	for _, e := range all[:5] {
		fmt.Printf("%-6s %d\n", e.w, e.n)
	}
}
