package shell

import "strings"

// MaxArgBytes is the longest string passed to a process as one argument
// or environment value. Linux refuses any single one over 128 KiB
// (MAX_ARG_STRLEN) with E2BIG; this leaves room. A longer command takes
// another way in: the runtime server's /execute runs it from a script
// file, the process API client passes it in environment pieces of this
// size.
const MaxArgBytes = 96 << 10

// Quote returns s as one single-quoted sh word: sh reads it back as
// exactly s, whatever s holds (NUL excepted, which no sh word can carry).
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Word returns s as one sh word, quoted (Quote) only when it holds a
// character sh would read specially: a path or a name stays readable.
func Word(s string) string {
	if s != "" && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._+-=") == "" {
		return s
	}
	return Quote(s)
}

// NamePattern describes the names ValidName accepts, for error messages.
const NamePattern = "[A-Za-z_][A-Za-z0-9_]*"

// ValidName reports whether name is a shell variable name
// ([A-Za-z_][A-Za-z0-9_]*): what a POSIX shell passes on to the commands
// it runs. Other names would silently disappear.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// EnvironKey reports whether name can be carried in a process environment
// at all (non-empty, no '=' or NUL): the looser rule the runtime server
// applies to request env, as upstream's runtime does.
func EnvironKey(name string) bool {
	return name != "" && !strings.ContainsAny(name, "=\x00")
}
