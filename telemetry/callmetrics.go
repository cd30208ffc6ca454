package telemetry

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/rpcconv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callMetrics records rpc.server.call.duration for every call of a gRPC
// server: the series otelgrpc's server handler records (same scope,
// name, unit, buckets and attributes: rpc.method, rpc.system.name,
// rpc.response.status_code, and error.type for the codes otelgrpc counts
// as server errors), for a fraction of its cost when no span is to be
// made. otelgrpc's stats handler makes grpc-go copy every call's metadata
// and report each of its events, and builds and hashes the call's
// attribute set at its end: a fifth of a GetTarget's CPU. Here a call
// costs two clock reads and one histogram update with an attribute set
// made once per method and code. The duration runs from the first
// interceptor (install these first) to the handler's return, where
// otelgrpc's runs from the stream's arrival to its last frame written:
// it leaves out decoding the request and writing the response.
type callMetrics struct {
	duration metric.Float64Histogram
	mu       sync.RWMutex
	sets     map[callKey]metric.RecordOption // guarded by mu
}

// callKey is what a call's attributes depend on.
type callKey struct {
	method string
	code   codes.Code
}

// maxCallSets bounds the attribute sets callMetrics keeps: a server has a
// few methods, and a call of a method it does not have never reaches the
// interceptors, so the bound is never reached but by a bug.
const maxCallSets = 1024

func newCallMetrics(mp metric.MeterProvider) (*callMetrics, error) {
	meter := mp.Meter(otelgrpc.ScopeName, metric.WithInstrumentationVersion(otelgrpc.Version), metric.WithSchemaURL(semconv.SchemaURL))
	d, err := rpcconv.NewServerCallDuration(meter, metric.WithExplicitBucketBoundaries( // otelgrpc's
		0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
	if err != nil {
		return nil, err
	}
	return &callMetrics{duration: d.Inst(), sets: make(map[callKey]metric.RecordOption)}, nil
}

// serverOptions are the interceptors that record the calls.
func (m *callMetrics) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.unary), grpc.ChainStreamInterceptor(m.stream)}
}

func (m *callMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.record(ctx, info.FullMethod, err, time.Since(start))
	return resp, err
}

func (m *callMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	m.record(ss.Context(), info.FullMethod, err, time.Since(start))
	return err
}

// record records one call of fullMethod ("/package.Service/Method") that
// ended with err.
func (m *callMetrics) record(ctx context.Context, fullMethod string, err error, d time.Duration) {
	m.duration.Record(ctx, d.Seconds(), m.attributes(callKey{fullMethod, status.Code(err)}))
}

// attributes returns the attribute set of calls of k, made once.
func (m *callMetrics) attributes(k callKey) metric.RecordOption {
	m.mu.RLock()
	opt, ok := m.sets[k]
	m.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(callAttributes(k))
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sets) < maxCallSets {
		m.sets[k] = opt
	}
	return opt
}

// callAttributes are otelgrpc's attributes of a server call of k.
func callAttributes(k callKey) attribute.Set {
	kvs := []attribute.KeyValue{semconv.RPCSystemNameGRPC, semconv.RPCResponseStatusCode(statusName(k.code))}
	if name, ok := strings.CutPrefix(k.method, "/"); ok {
		kvs = append(kvs, semconv.RPCMethod(name))
	}
	switch k.code {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		kvs = append(kvs, semconv.ErrorTypeKey.String(statusName(k.code)))
	}
	return attribute.NewSet(kvs...)
}

// statusNames are the canonical names of the codes, as otelgrpc writes
// them.
var statusNames = [...]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

// statusName is the canonical name of c ("OK", "NOT_FOUND").
func statusName(c codes.Code) string {
	if int(c) < len(statusNames) {
		return statusNames[c]
	}
	return "CODE(" + strconv.FormatInt(int64(c), 10) + ")"
}
