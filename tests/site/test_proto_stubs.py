"""The committed generated stubs in dsroc/v1 match proto/dsroc/v1/site.proto."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2

from dsroc.v1 import site_pb2, site_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
GENERATE = (
    "python -m grpc_tools.protoc -I proto --python_out=. --grpc_python_out=. --pyi_out=. "
    "proto/dsroc/v1/site.proto"
)


def test_committed_stubs_match_the_proto(tmp_path):
    out = tmp_path / "site.pb"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT / "proto"),
         f"--descriptor_set_out={out}", str(ROOT / "proto/dsroc/v1/site.proto")],
        check=True,
    )
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    (fresh,) = [f for f in fds.file if f.name == "dsroc/v1/site.proto"]
    committed = descriptor_pb2.FileDescriptorProto.FromString(site_pb2.DESCRIPTOR.serialized_pb)
    _drop_json_names(fresh)  # protoc fills json_name in descriptor sets but the Python generator omits it
    assert committed == fresh, f"dsroc/v1 stubs are stale; regenerate from the repo root with:\n  {GENERATE}"


def test_stub_exposes_every_call_of_the_spec():
    service = site_pb2.DESCRIPTOR.services_by_name["SiteService"]
    calls = {m.name for m in service.methods}
    assert calls == {
        "Describe", "OpenSession", "Sensitivity", "ReleaseNoisyScores", "UploadSurvivor", "UploadSurvivors", "RocGlmParts",
        "PlacementMoments", "BrierParts", "CalibrationParts", "ConfusionParts", "PaperAggregates", "Budget",
        "CloseSession",
        "ReleaseHistogram", "ReleaseSurvival",
        "ReleaseBoydStatistics",
        "PrepareRelease", "CancelReservation",
        "SecAggAdvertise",
        "SecAggMask",
        "SecAggUnmask", "SecAggConfirm",
    }
    methods = service.methods_by_name
    assert methods["ReleaseNoisyScores"].server_streaming and not methods["ReleaseNoisyScores"].client_streaming
    assert methods["UploadSurvivor"].client_streaming and not methods["UploadSurvivor"].server_streaming
    assert methods["UploadSurvivors"].client_streaming and not methods["UploadSurvivors"].server_streaming
    assert hasattr(site_pb2_grpc, "SiteServiceStub") and hasattr(site_pb2_grpc, "add_SiteServiceServicer_to_server")


def _drop_json_names(file_proto) -> None:
    def walk(messages):
        for message in messages:
            for field in message.field:
                field.ClearField("json_name")
            walk(message.nested_type)
    walk(file_proto.message_type)
