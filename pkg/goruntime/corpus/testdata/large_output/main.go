// Prints about 2.5 MB: 40000 numbered lines, then a summary on stderr.
package main

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"os"
)

func main() {
	w := bufio.NewWriter(os.Stdout)
	h := crc32.NewIEEE()
	for i := 1; i <= 40000; i++ {
		line := fmt.Sprintf("line %05d: %s\n", i, "the quick brown fox jumps over the lazy dog")
		w.WriteString(line)
		h.Write([]byte(line))
	}
	w.Flush()
	fmt.Fprintf(os.Stderr, "wrote 40000 lines, crc32 %08x\n", h.Sum32())
}
