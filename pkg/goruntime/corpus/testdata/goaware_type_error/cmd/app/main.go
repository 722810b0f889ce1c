package main

import (
	"fmt"

	"example.com/m/internal/calc"
)

func main() { fmt.Println(calc.Add(1, 2)) }
