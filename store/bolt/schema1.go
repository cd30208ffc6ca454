package bolt

import (
	"encoding/json"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// Schema 1 values: the engine's types encoded with encoding/json, through
// their json tags (names for enums, RFC 3339 times). They are read only to
// upgrade a schema 1 file (upgrade.go); testdata/schema1.db, written by the
// schema 1 store, pins what they hold.

func decodeSpec1(b []byte, s *target.Spec) error { return json.Unmarshal(b, s) }

func decodeStatus1(b []byte, s *engine.Status) error { return json.Unmarshal(b, s) }

func decodeEvent1(b []byte, ev *engine.Event) error { return json.Unmarshal(b, ev) }
