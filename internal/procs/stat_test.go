package procs

import (
	"os"
	"testing"
)

func TestParseCPU(t *testing.T) {
	tests := []struct {
		name              string
		line              string
		wantUser, wantSys uint64
		wantErr           bool
	}{
		{
			name:     "plain",
			line:     "16769 (cat) R 16760 16760 1831 0 -1 4194304 129 0 0 0 7 3 0 0 20 0 1 0 442657 3133440 416",
			wantUser: 7, wantSys: 3,
		},
		{
			name:     "command with spaces and parentheses",
			line:     "42 (a (b) c) S 1 1 1 0 -1 0 0 0 0 0 1234 56 0 0 20 0 9 0 1 1 1",
			wantUser: 1234, wantSys: 56,
		},
		{name: "no command", line: "42 S 1", wantErr: true},
		{name: "truncated", line: "42 (x) S 1 1 1", wantErr: true},
		{name: "not a number", line: "42 (x) S 1 1 1 0 -1 0 0 0 0 0 x 56 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, s, err := parseCPU([]byte(tt.line))
			if (err != nil) != tt.wantErr || u != tt.wantUser || s != tt.wantSys {
				t.Errorf("parseCPU(%q) = %d, %d, %v; want %d, %d, error %v", tt.line, u, s, err, tt.wantUser, tt.wantSys, tt.wantErr)
			}
		})
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tprobed\nVmPeak:\t  100 kB\nVmHWM:\t    2196 kB\nVmRSS:\t    2000 kB\n"
	if got, err := parseStatusKB([]byte(status), "VmHWM"); err != nil || got != 2196<<10 {
		t.Errorf("VmHWM = %d, %v; want %d", got, err, 2196<<10)
	}
	if _, err := parseStatusKB([]byte(status), "VmSwap"); err == nil {
		t.Error("VmSwap: no error for a missing key")
	}
	if _, err := parseStatusKB([]byte("VmHWM: 12 MB\n"), "VmHWM"); err == nil {
		t.Error("no error for a unit other than kB")
	}
}

func TestStatOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cpu, err := CPU(os.Getpid())
	if err != nil || cpu < 0 {
		t.Errorf("CPU(self) = %v, %v", cpu, err)
	}
	rss, err := PeakRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Errorf("PeakRSS(self) = %d, %v", rss, err)
	}
	now, anon, file, err := RSSParts(os.Getpid())
	if err != nil || anon <= 0 || file <= 0 || now < anon+file-64<<10 || now > anon+file+64<<10 {
		t.Errorf("RSSParts(self) = %d, %d anonymous, %d files, %v; want about their sum", now, anon, file, err)
	}
}
