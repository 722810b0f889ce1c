// Package greet formats greetings.
package greet

import "strings"

// Hello greets each name.
func Hello(names ...string) string {
	if len(names) == 0 {
		return "Hello, nobody!"
	}
	return "Hello, " + strings.Join(names, " and ") + "!"
}
