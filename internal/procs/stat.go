package procs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: the kernel's
// USER_HZ, 100 on every Linux architecture Go supports.
const userHZ = 100

// statFields returns the fields of a /proc/<pid>/stat line from field 3
// (the state) on, at least min of them. The command name (field 2) is in
// parentheses and may hold spaces and parentheses, so the fields are
// counted from its last ')'.
func statFields(b []byte, minFields int) ([][]byte, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("no command name in %q", b)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < minFields {
		return nil, fmt.Errorf("too few fields in %q", b)
	}
	return f, nil
}

// CPU returns the CPU time (user + system, every thread, including exited
// ones) process pid has used so far, read from /proc/<pid>/stat, with a
// resolution of 10ms.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	utime, stime, err := parseCPU(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// parseCPU returns utime and stime (fields 14 and 15, in clock ticks) of
// a /proc/<pid>/stat line.
func parseCPU(b []byte) (utime, stime uint64, err error) {
	f, err := statFields(b, 13) // f[0] is field 3
	if err != nil {
		return 0, 0, err
	}
	if utime, err = strconv.ParseUint(string(f[11]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseUint(string(f[12]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}

// PeakRSS returns the peak resident set size of process pid (VmHWM in
// /proc/<pid>/status), in bytes.
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmHWM")
}

// RSS returns the resident set size of process pid (VmRSS in
// /proc/<pid>/status), in bytes.
func RSS(pid int) (int64, error) {
	rss, _, _, err := RSSParts(pid)
	return rss, err
}

// RSSParts returns the resident set size of process pid and its anonymous
// and file-backed parts (VmRSS, RssAnon, RssFile), in bytes.
func RSSParts(pid int) (rss, anon, file int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	if rss, err = parseStatusKB(b, "VmRSS"); err != nil {
		return 0, 0, 0, err
	}
	if anon, err = parseStatusKB(b, "RssAnon"); err != nil {
		return 0, 0, 0, err
	}
	if file, err = parseStatusKB(b, "RssFile"); err != nil {
		return 0, 0, 0, err
	}
	return rss, anon, file, nil
}

// parseStatusKB returns the value of a "Key:   123 kB" line of a
// /proc/<pid>/status file, in bytes.
func parseStatusKB(b []byte, key string) (int64, error) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte(key+":"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("malformed %s line %q", key, line)
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s line", key)
}
