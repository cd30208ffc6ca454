package server

import (
	"bytes"
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/probed/probed/engine"
)

// TargetJSON returns t as `probectl get NAME -o json` prints it (without
// the final newline): the protojson of its probev1.Target, indented by two
// spaces. protojson varies its whitespace on purpose, so the layout is
// normalised to encoding/json's, as probectl does, to be stable.
func TargetJSON(t *engine.Target) ([]byte, error) {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(fromTarget(nil, t))
	if err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
