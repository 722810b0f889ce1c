package report

import "fmt"

func Print() {
	fmt.Printf("%d\n", "not a number")
}
