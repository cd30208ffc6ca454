package codec

import (
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	storagev1 "github.com/probed/probed/proto/probed/storage/v1"
)

// The enums are mapped value by value, never by number, so that
// renumbering the engine's constants cannot change what is stored. An
// UNSPECIFIED value reads as the engine type's zero value.

func phaseToProto(p engine.Phase) (storagev1.Phase, error) {
	switch p {
	case 0:
		return storagev1.Phase_PHASE_UNSPECIFIED, nil
	case engine.Active:
		return storagev1.Phase_PHASE_ACTIVE, nil
	case engine.Terminating:
		return storagev1.Phase_PHASE_TERMINATING, nil
	default:
		return 0, unencodable(uint8(p))
	}
}

func phaseFromProto(p storagev1.Phase) (engine.Phase, error) {
	switch p {
	case storagev1.Phase_PHASE_UNSPECIFIED:
		return 0, nil
	case storagev1.Phase_PHASE_ACTIVE:
		return engine.Active, nil
	case storagev1.Phase_PHASE_TERMINATING:
		return engine.Terminating, nil
	default:
		return 0, unknownEnum(int32(p))
	}
}

func typeToProto(t probe.Type) (storagev1.ProbeType, error) {
	switch t {
	case probe.Startup:
		return storagev1.ProbeType_PROBE_TYPE_STARTUP, nil
	case probe.Liveness:
		return storagev1.ProbeType_PROBE_TYPE_LIVENESS, nil
	case probe.Readiness:
		return storagev1.ProbeType_PROBE_TYPE_READINESS, nil
	default:
		return 0, unencodable(t)
	}
}

func typeFromProto(t storagev1.ProbeType) (probe.Type, error) {
	switch t {
	case storagev1.ProbeType_PROBE_TYPE_UNSPECIFIED, storagev1.ProbeType_PROBE_TYPE_STARTUP:
		return probe.Startup, nil
	case storagev1.ProbeType_PROBE_TYPE_LIVENESS:
		return probe.Liveness, nil
	case storagev1.ProbeType_PROBE_TYPE_READINESS:
		return probe.Readiness, nil
	default:
		return 0, unknownEnum(int32(t))
	}
}

func resultToProto(r probe.Result) (storagev1.Result, error) {
	switch r {
	case probe.Unknown:
		return storagev1.Result_RESULT_UNKNOWN, nil
	case probe.Success:
		return storagev1.Result_RESULT_SUCCESS, nil
	case probe.Failure:
		return storagev1.Result_RESULT_FAILURE, nil
	default:
		return 0, unencodable(r)
	}
}

func resultFromProto(r storagev1.Result) (probe.Result, error) {
	switch r {
	case storagev1.Result_RESULT_UNSPECIFIED, storagev1.Result_RESULT_UNKNOWN:
		return probe.Unknown, nil
	case storagev1.Result_RESULT_SUCCESS:
		return probe.Success, nil
	case storagev1.Result_RESULT_FAILURE:
		return probe.Failure, nil
	default:
		return 0, unknownEnum(int32(r))
	}
}

func schemeToProto(s probe.Scheme) (storagev1.Scheme, error) {
	switch s {
	case "":
		return storagev1.Scheme_SCHEME_UNSPECIFIED, nil
	case probe.SchemeHTTP:
		return storagev1.Scheme_SCHEME_HTTP, nil
	case probe.SchemeHTTPS:
		return storagev1.Scheme_SCHEME_HTTPS, nil
	default:
		return 0, unencodable(string(s))
	}
}

func schemeFromProto(s storagev1.Scheme) (probe.Scheme, error) {
	switch s {
	case storagev1.Scheme_SCHEME_UNSPECIFIED:
		return "", nil
	case storagev1.Scheme_SCHEME_HTTP:
		return probe.SchemeHTTP, nil
	case storagev1.Scheme_SCHEME_HTTPS:
		return probe.SchemeHTTPS, nil
	default:
		return "", unknownEnum(int32(s))
	}
}

// kinds maps every engine.EventKind to its stored value; its index is the
// engine's kind.
var kinds = [...]storagev1.EventKind{
	0:                      storagev1.EventKind_EVENT_KIND_UNSPECIFIED,
	engine.KindSnapshot:    storagev1.EventKind_EVENT_KIND_SNAPSHOT,
	engine.KindTransition:  storagev1.EventKind_EVENT_KIND_TRANSITION,
	engine.KindInitialized: storagev1.EventKind_EVENT_KIND_INITIALIZED,
	engine.KindCreated:     storagev1.EventKind_EVENT_KIND_CREATED,
	engine.KindUpdated:     storagev1.EventKind_EVENT_KIND_UPDATED,
	engine.KindReset:       storagev1.EventKind_EVENT_KIND_RESET,
	engine.KindTerminating: storagev1.EventKind_EVENT_KIND_TERMINATING,
	engine.KindDeleted:     storagev1.EventKind_EVENT_KIND_DELETED,
}

func kindToProto(k engine.EventKind) (storagev1.EventKind, error) {
	if int(k) >= len(kinds) || (k != 0 && kinds[k] == 0) {
		return 0, unencodable(uint8(k))
	}
	return kinds[k], nil
}

func kindFromProto(k storagev1.EventKind) (engine.EventKind, error) {
	for i, v := range kinds {
		if v == k {
			return engine.EventKind(i), nil
		}
	}
	return 0, unknownEnum(int32(k))
}
