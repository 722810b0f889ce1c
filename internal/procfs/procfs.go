package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is the part of /proc/<pid>/stat this project reads.
type Stat struct {
	// State is the one-letter state: 'R', 'S', 'D', 'Z' (zombie), ...
	State byte
	// Pgrp is field 5: the process group the process is in.
	Pgrp int
	// StartTime is field 22: when the process started, in clock ticks
	// since boot. A pid reused by another process has another StartTime.
	StartTime uint64
}

// ReadStat parses /proc/<pid>/stat. Errors: the process does not exist
// (wrapping fs.ErrNotExist) or the file has an unexpected shape.
func ReadStat(pid int) (Stat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(pid, string(data))
}

func parseStat(pid int, s string) (Stat, error) {
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses itself: the fields resume after the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return Stat{}, fmt.Errorf("parse /proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("parse /proc/%d/stat start time: %w", pid, err)
	}
	pgrp, err := strconv.Atoi(fields[2])
	if err != nil {
		return Stat{}, fmt.Errorf("parse /proc/%d/stat process group: %w", pid, err)
	}
	return Stat{State: fields[0][0], Pgrp: pgrp, StartTime: start}, nil
}

// GroupRunning reports whether any process of process group pgid runs
// (is not a zombie).
func GroupRunning(pgid int) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(pid); err == nil && st.Pgrp == pgid && st.State != 'Z' {
			return true, nil
		}
	}
	return false, nil
}

// Alive reports whether pid runs (is not a zombie) and is the process that
// started at start; start 0 accepts any start time.
func Alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := ReadStat(pid)
	if err != nil || st.State == 'Z' {
		return false
	}
	return start == 0 || st.StartTime == start
}
