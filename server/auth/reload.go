package auth

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"time"
)

// DefaultReloadInterval is how often Watch looks at the credential files.
const DefaultReloadInterval = 5 * time.Second

// Reloader is a credential read from files that can reread them when
// they change. Reload reports whether it loaded new contents; an error
// leaves the previous contents in use.
type Reloader interface {
	Reload() (changed bool, err error)
	String() string
}

// Watch calls Reload on every reloader each interval until ctx is done,
// logging what changed and what failed. It returns when ctx is done.
func Watch(ctx context.Context, interval time.Duration, log *slog.Logger, rs ...Reloader) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, r := range rs {
			changed, err := r.Reload()
			switch {
			case err != nil:
				log.Error("reloading credentials failed; keeping the previous ones", "what", r.String(), "err", err)
			case changed:
				log.Info("credentials reloaded", "what", r.String())
			}
		}
	}
}

// stamp identifies one version of a file: a change of file (a rename over
// it, a symlink switched as Kubernetes does for mounted secrets), size or
// modification time is a new version.
type stamp struct {
	info os.FileInfo
}

func (s stamp) same(o stamp) bool {
	if s.info == nil || o.info == nil {
		return s.info == o.info
	}
	return os.SameFile(s.info, o.info) && s.info.Size() == o.info.Size() && s.info.ModTime().Equal(o.info.ModTime())
}

func stat(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stamp{info: fi}, nil
}

// stamps tracks the versions of a set of files loaded together.
type stamps struct {
	current []stamp // versions last loaded
	failed  []stamp // versions that failed to load (reported once)
}

func sameStamps(a, b []stamp) bool {
	return slices.EqualFunc(a, b, stamp.same)
}

// reload calls load when any of paths changed since the last successful
// load. A failure is returned once per set of versions.
func (s *stamps) reload(paths []string, load func() error) (bool, error) {
	now := make([]stamp, len(paths))
	for i, p := range paths {
		st, err := stat(p)
		if err != nil {
			now[i] = stamp{} // missing: a version of its own
			continue
		}
		now[i] = st
	}
	if sameStamps(now, s.current) || sameStamps(now, s.failed) {
		return false, nil
	}
	if err := load(); err != nil {
		s.failed = now
		return false, err
	}
	s.current, s.failed = now, nil
	return true, nil
}
