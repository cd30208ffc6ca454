package codec_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// FuzzUnmarshal: no input makes a decoder panic, and whatever decodes
// encodes again to a value that decodes to the same.
func FuzzUnmarshal(f *testing.F) {
	files, err := filepath.Glob("testdata/*.bin")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b := readFileF(f, name)
		f.Add(b)
	}
	likes := []any{&target.Spec{}, &engine.Status{}, &engine.Target{}, &engine.Event{}, batch{}}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, like := range likes {
			v, err := unmarshalLike(b, like)
			if err != nil {
				continue
			}
			again, err := marshalAny(v)
			if err != nil {
				t.Fatalf("%T decoded from %x does not encode: %v", like, b, err)
			}
			back, err := unmarshalLike(again, like)
			if err != nil {
				t.Fatalf("%T re-encoded as %x does not decode: %v", like, again, err)
			}
			if diff := cmp.Diff(v, back, ignoreChangeInternals); diff != "" {
				t.Fatalf("%T from %x changed on a second round trip (-first +second):\n%s", like, b, diff)
			}
		}
	})
}

func readFileF(f *testing.F, name string) []byte {
	f.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
