#!/usr/bin/env python3
"""A probed client in Python with Debian's packages: python3-grpcio,
python3-protobuf and protoc (protobuf-compiler >= 3.15: probe.proto uses
proto3 `optional`).

    python3 example.py [ADDR]      (default 127.0.0.1:50051, make run's)

It compiles probe.proto and the google/rpc protos (third_party/googleapis)
with protoc into a temporary directory (message classes only: the calls go
through grpc's generic channel methods, so no gRPC plugin is needed), then
creates a target whose readiness probe connects to a TCP server this
script starts, watches the probe's transition to success, sends a spec
with three mistakes and prints the field violations probed returns (a
google.rpc.BadRequest in the grpc-status-details-bin trailer), and deletes
the target.
"""

import importlib
import os
import socket
import subprocess
import sys
import tempfile
import threading

import grpc

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PROTOS = ["probe/v1/probe.proto", "google/rpc/status.proto", "google/rpc/error_details.proto"]
NAME = "from-python"
SERVICE = "/probe.v1.ProbeService/"


def compile_protos(out):
    """Generates the message classes of PROTOS into out and imports them."""
    subprocess.run(
        ["protoc", "-I", os.path.join(ROOT, "proto"), "-I", os.path.join(ROOT, "third_party", "googleapis"),
         "--python_out=" + out] + PROTOS,
        check=True,
    )
    sys.path.insert(0, out)
    return (importlib.import_module("probe.v1.probe_pb2"),
            importlib.import_module("google.rpc.status_pb2"),
            importlib.import_module("google.rpc.error_details_pb2"))


def main():
    addr = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
    with tempfile.TemporaryDirectory() as out:
        pb, status_pb2, details_pb2 = compile_protos(out)
        run(addr, pb, status_pb2, details_pb2)


def run(addr, pb, status_pb2, details_pb2):
    channel = grpc.insecure_channel(addr)

    def unary(method, request, response):
        return channel.unary_unary(SERVICE + method, request_serializer=request.SerializeToString,
                                   response_deserializer=response.FromString)

    create = lambda req: unary("CreateTarget", req, pb.CreateTargetResponse)(req, timeout=10)
    delete = lambda req: unary("DeleteTarget", req, pb.DeleteTargetResponse)(req, timeout=10)
    watch = channel.unary_stream(SERVICE + "Watch", request_serializer=pb.WatchRequest.SerializeToString,
                                 response_deserializer=pb.WatchResponse.FromString)

    # A TCP server for the readiness probe to connect to.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()
    threading.Thread(target=accept, daemon=True).start()

    try:
        try:
            delete(pb.DeleteTargetRequest(name=NAME, grace_period_seconds=0))  # a previous run's
        except grpc.RpcError:
            pass

        # 1. A target probed every 100 ms: period_seconds 1 + period_milliseconds -900.
        probe = pb.Probe(tcp_socket=pb.TCPSocketAction(host="127.0.0.1", port=port),
                         period_seconds=1, period_milliseconds=-900)
        target = create(pb.CreateTargetRequest(target=pb.Target(
            name=NAME, labels={"lang": "python"}, readiness_probe=probe))).target
        print(f"created target {target.name} (revision {target.status.revision})")

        # 2. Its readiness transition, replayed from the creation's revision.
        stream = watch(pb.WatchRequest(since_revision=target.status.revision, names=[NAME],
                                       kinds=[pb.EVENT_KIND_TRANSITION]), timeout=10)
        done = False
        for res in stream:
            for ev in res.events:
                # Event.from is a Python keyword: getattr reads it.
                frm = getattr(ev, "from")
                if ev.probe_type == pb.PROBE_TYPE_READINESS and ev.to == pb.RESULT_SUCCESS:
                    name = lambda r: pb.Result.Name(r).removeprefix("RESULT_").lower()
                    print(f"{ev.name}: readiness {name(frm)}→{name(ev.to)}, ready={str(ev.ready).lower()}")
                    done = True
            if done:
                stream.cancel()
                break

        # 3. A spec with three mistakes: every one is reported, by field
        # (paths in the API's JSON names: target.readinessProbe.tcpSocket.port).
        bad = pb.Probe(tcp_socket=pb.TCPSocketAction(host="127.0.0.1", port=0), period_seconds=1,
                       period_milliseconds=-950, timeout_milliseconds=1000)
        try:
            create(pb.CreateTargetRequest(target=pb.Target(name="bad", readiness_probe=bad)))
            raise SystemExit("error: the bad spec was accepted")
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.INVALID_ARGUMENT:
                raise
            print("bad spec rejected: INVALID_ARGUMENT")
            for v in field_violations(err, status_pb2, details_pb2):
                print(f"  {v.field}: {v.description}")

        delete(pb.DeleteTargetRequest(name=NAME, grace_period_seconds=0))
        print(f"deleted target {NAME}")
    finally:
        server.close()
        channel.close()


def field_violations(err, status_pb2, details_pb2):
    """Returns the google.rpc.BadRequest field violations of a gRPC error."""
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        for detail in status_pb2.Status.FromString(value).details:
            if detail.Is(details_pb2.BadRequest.DESCRIPTOR):
                br = details_pb2.BadRequest()
                detail.Unpack(br)
                yield from br.field_violations


if __name__ == "__main__":
    try:
        main()
    except grpc.RpcError as err:
        sys.exit(f"error: {err.code().name}: {err.details()}")
