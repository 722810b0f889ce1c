// Command inventory applies stock moves and prints the result.
package main

import (
	"fmt"
	"os"
	"strconv"

	"example.com/multi-package/internal/store"
	"example.com/multi-package/internal/textfmt"
)

func main() {
	s := store.New()
	moves := []struct {
		item string
		n    int
	}{{"bolt", 100}, {"nut", 250}, {"washer", 75}, {"bolt", -30}, {"nut", -300}}
	for _, m := range moves {
		if err := s.Add(m.item, m.n); err != nil {
			fmt.Fprintln(os.Stderr, "warning:", err)
		}
	}
	var rows [][]string
	for _, n := range s.Names() {
		rows = append(rows, []string{n, strconv.Itoa(s.Count(n))})
	}
	fmt.Print(textfmt.Table([]string{"item", "count"}, rows))
}
