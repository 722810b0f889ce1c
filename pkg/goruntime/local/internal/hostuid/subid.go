package hostuid

// Subordinate ids: a user other than root may give its sandboxes host
// uids (and gids) of their own from the ranges /etc/subuid and
// /etc/subgid grant it, mapped into a user namespace by the setuid
// helpers newuidmap and newgidmap (Debian's uidmap), as rootless podman
// does.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Range is a block of subordinate ids: Start..Start+Count-1.
type Range struct {
	Start, Count int
}

// ErrNoSubIDs is wrapped by SubIDs when the file grants the user nothing.
var ErrNoSubIDs = errors.New("no subordinate ids")

// SubIDs returns the first block of subordinate ids that file (in
// /etc/subuid's format: "name-or-id:start:count" a line) grants the user
// called name with id id, as newuidmap reads it: a line matches by name
// or by number. Blocks overlapping ids 0..id, which would alias root or
// the user, are skipped.
func SubIDs(file, name string, id int) (Range, error) {
	f, err := os.Open(file)
	if err != nil {
		return Range{}, fmt.Errorf("read subordinate ids: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		owner, rest, ok := strings.Cut(line, ":")
		if !ok || (owner != name && owner != strconv.Itoa(id)) {
			continue
		}
		s, c, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		start, err1 := strconv.Atoi(s)
		count, err2 := strconv.Atoi(c)
		if err1 != nil || err2 != nil || count <= 0 || start <= id {
			continue
		}
		return Range{Start: start, Count: count}, nil
	}
	if err := sc.Err(); err != nil {
		return Range{}, fmt.Errorf("read subordinate ids from %s: %w", file, err)
	}
	return Range{}, fmt.Errorf("%s grants %s (%d) %w", file, name, id, ErrNoSubIDs)
}
