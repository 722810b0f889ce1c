// Multi-byte text, combining marks, emoji, width-aware padding, and bytes
// that are not valid UTF-8 (the runtime server replaces those with U+FFFD).
package main

import (
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

func main() {
	words := []string{"héllo", "日本語", "Ελληνικά", "emoji 🐹🚀", "e\u0301", "עברית", "🇫🇷"}
	for _, w := range words {
		fmt.Printf("%-12s bytes=%2d runes=%d upper=%s\n", w, len(w), utf8.RuneCountInString(w), strings.ToUpper(w))
	}
	n := 0
	for _, r := range "Grüße, Gopher! 123" {
		if unicode.IsLetter(r) {
			n++
		}
	}
	fmt.Println("letters:", n)
	fmt.Printf("%q %+q %x\n", "日本", "日本", "é")
	os.Stdout.Write([]byte{'r', 'a', 'w', ':', ' ', 0xff, 0xfe, 'o', 'k', ' ', 0xe6, 0x97, '\n'})
	os.Stderr.Write([]byte("stderr: ünïcødé \xc3\x28 end\n"))
}
