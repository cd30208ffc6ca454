package bolt_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/store/bolt"
	"github.com/probed/probed/store/storetest"
)

// TestLoadLeavesFileOutOfRSS checks that Load, which reads every page of
// the data file through bbolt's mapping, leaves none of them resident in
// the process (after a restart they were all counted in probed's RSS).
func TestLoadLeavesFileOutOfRSS(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	at := time.Unix(1_700_000_000, 0)
	for batch := range 20 {
		var changes []*engine.Change
		for i := range 100 {
			changes = append(changes, storetest.Create(storetest.WebSpec(fmt.Sprintf("target-%02d-%03d", batch, i)), at))
		}
		if err := s.Commit(context.Background(), changes); err != nil {
			t.Fatal(err)
		}
	}
	closeStore(t, s)

	s = mustOpen(t, dir)
	defer closeStore(t, s)
	path := filepath.Join(dir, bolt.FileName)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Targets) != 2000 {
		t.Fatalf("loaded %d targets, want 2000", len(st.Targets))
	}
	rss := mappedRSS(t, path)
	// Open reads the meta pages and the freelist: a few pages.
	if limit := int64(64 << 10); rss > limit {
		t.Errorf("after Load, %d bytes of the %d-byte data file are resident in this process, want at most %d", rss, info.Size(), limit)
	}
}

// mappedRSS returns the resident bytes of this process's mappings of the
// file at path (/proc/self/smaps).
func mappedRSS(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	var rss int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-"):
			in = len(fields) >= 6 && fields[5] == path
		case in && fields[0] == "Rss:":
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			rss += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rss
}
