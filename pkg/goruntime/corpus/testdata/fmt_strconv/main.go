// fmt verbs over structs, maps, pointers-free values, and strconv edges.
package main

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

type Point struct {
	X, Y int
	Tag  string
}

func (p Point) String() string { return fmt.Sprintf("(%d,%d)", p.X, p.Y) }

type raw struct {
	A int
	B []string
	C map[string]float64
}

func main() {
	p := Point{3, -4, "origin-ish"}
	r := raw{A: 7, B: []string{"x", "y"}, C: map[string]float64{"pi": math.Pi, "e": math.E}}
	fmt.Printf("%v|%+v|%s\n", p, r, p)
	fmt.Printf("%#v\n", r)
	fmt.Printf("%T %T %T\n", p, r.C, 'x')
	fmt.Printf("[%8.3f] [%-8d] [%08b] [%x] [%X] [%o] [%e] [%g]\n", math.Pi, 42, 5, 255, "hi", 8, 123456.789, 1e21)
	fmt.Printf("%5t %v %q %U\n", true, nil, 'é', 'é')
	fmt.Println(math.Inf(1), -math.Inf(1), math.NaN(), math.MaxInt64, math.SmallestNonzeroFloat64)
	for _, s := range []string{"42", "-0", "0x1F", "1e3", "abc", "99999999999999999999"} {
		n, err := strconv.ParseInt(s, 0, 64)
		fmt.Println(s, n, err)
	}
	fmt.Println(strconv.FormatFloat(0.1+0.2, 'f', -1, 64), strconv.Quote("tab\there\n"), strconv.Itoa(-7))
	f := new(big.Int)
	f.MulRange(1, 30)
	fmt.Println("30! =", f)
}
