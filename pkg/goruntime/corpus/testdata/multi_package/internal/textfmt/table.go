// Package textfmt renders aligned tables.
package textfmt

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Table renders rows as aligned columns.
func Table(header []string, rows [][]string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(w, strings.Join(header, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t")+"\t")
	}
	w.Flush()
	return b.String()
}
