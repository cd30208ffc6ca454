package main

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

// procCPU returns the CPU time (user + system, every thread, including
// exited ones) process pid has used so far, read from /proc/<pid>/stat,
// with a resolution of 10ms.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	utime, stime, err := parseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// parseProcStat returns utime and stime (fields 14 and 15, in clock
// ticks) of a /proc/<pid>/stat line. The command name (field 2) is in
// parentheses and may contain spaces and parentheses, so the fields are
// counted from the last ')'.
func parseProcStat(b []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no command name in %q", b)
	}
	fields := bytes.Fields(b[i+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return 0, 0, fmt.Errorf("too few fields in %q", b)
	}
	if utime, err = strconv.ParseUint(string(fields[11]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseUint(string(fields[12]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}

// procPeakRSS returns the peak resident set size of process pid (VmHWM
// in /proc/<pid>/status), in bytes.
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmHWM")
}

// procRSS returns the resident set size of process pid (VmRSS in
// /proc/<pid>/status), in bytes.
func procRSS(pid int) (int64, error) {
	rss, _, _, err := procRSSParts(pid)
	return rss, err
}

// procRSSParts returns the resident set size of process pid and its
// anonymous and file-backed parts (VmRSS, RssAnon, RssFile), in bytes.
func procRSSParts(pid int) (rss, anon, file int64, err error) {
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
