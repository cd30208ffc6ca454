package bolt

import (
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/codec"
)

// format decodes the values of one schema version.
type format struct {
	spec   func([]byte, *target.Spec) error
	status func([]byte, *engine.Status) error
	event  func([]byte, *engine.Event) error
}

// formats are the value formats by schema version.
var formats = map[uint64]format{
	1:             {spec: decodeSpec1, status: decodeStatus1, event: decodeEvent1},
	SchemaVersion: {spec: codec.UnmarshalSpec, status: codec.UnmarshalStatus, event: codec.UnmarshalEvent},
}
