"""The paper protocol's disclosure attacks (a sharp model, a crafted survivor function, a suppressed cell recovered
from a confusion matrix) as regression tests over real mutual-TLS daemons."""

from __future__ import annotations

import json

import grpc
import numpy as np
import pytest

from dsroc import calibration_parts
from dsroc.v1 import site_pb2 as pb
from site_node.interceptors.audit import read_audit
from site_node.cli import main

NEG, POS = pb.SCORE_CLASS_NEGATIVES, pb.SCORE_CLASS_POSITIVES
C = grpc.StatusCode


def _refused(fn, code, match=None):
    with pytest.raises(grpc.RpcError) as info:
        fn()
    assert info.value.code() == code, info.value.details()
    if match:
        assert match in info.value.details(), info.value.details()
    return info.value.details()


def _sharp_model(top_age: float, b: float = 1e4) -> dict:
    """Scores ~1 for the patient of age ``top_age`` (the unique oldest) and ~0 for everyone else."""
    return {"link": "logit", "intercept": -b * (top_age - 0.5), "coefficients": {"age": b}}


def _pb_model(model: dict) -> pb.GlmModel:
    return pb.GlmModel(link=pb.LINK_LOGIT, intercept=model["intercept"],
                       coefficients=[pb.Coefficient(name=k, value=v) for k, v in model["coefficients"].items()])


def _approve(server, model: dict, tmp_path, capsys) -> str:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    config = server.config.source
    config.write_text(f'[site]\nname = "s"\nstate_dir = "{server.config.state_dir}"\n')
    assert main(["model", "approve", str(path), "--config", str(config), "--note", "reviewed"]) == 0
    return capsys.readouterr().out.split()[1]


def test_a_sharp_model_is_refused_until_the_site_approves_it(tls_site, frame, snapshot, tmp_path, capsys):
    server, client = tls_site()
    ages = np.sort(frame["age"].to_numpy())
    assert ages[-1] > ages[-2]  # one oldest patient
    model = _sharp_model(ages[-1])
    s = client.open(model=_pb_model(model))  # opening a session is fine (the histogram protocol needs no approval)
    before = snapshot(server.config.ledger_path)
    calls = {
        "BrierParts": lambda: client.BrierParts(pb.BrierPartsRequest(session_id=s)),
        "Sensitivity": lambda: client.Sensitivity(pb.SensitivityRequest(session_id=s)),
        "ReleaseNoisyScores": lambda: client.release(s, NEG),
        "UploadSurvivor": lambda: client.upload(s, NEG, [0.2, 0.5]),
        "PlacementMoments": lambda: client.PlacementMoments(pb.PlacementMomentsRequest(session_id=s)),
        "RocGlmParts": lambda: client.RocGlmParts(pb.RocGlmPartsRequest(session_id=s, theta=[0, 1])),
        "CalibrationParts": lambda: client.CalibrationParts(pb.CalibrationPartsRequest(session_id=s)),
        "ConfusionParts": lambda: client.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.5)),
    }
    for call in calls.values():
        details = _refused(call, C.PERMISSION_DENIED, "model approval: this site answers the paper protocol")
        assert "dsroc-site model approve FILE" in details
    assert snapshot(server.config.ledger_path) == before
    assert [r["decision"] for r in read_audit(server.config.audit_path)][-len(calls):] == \
        ["PERMISSION_DENIED"] * len(calls)

    # The administrator approves it (audited); now the attack goes through, on purpose:
    # approving a model is the administrator's judgement that its answers are fine to give.
    digest = _approve(server, model, tmp_path, capsys)
    assert read_audit(server.config.audit_path)[-1]["call"] == "ModelApprove"
    assert read_audit(server.config.audit_path)[-1]["parameters"]["model_sha256"] == digest
    brier = client.BrierParts(pb.BrierPartsRequest(session_id=s))
    positives = int(frame["y"].sum())  # n1: released with every noisy release and placement moments
    assert round((positives + 1 - brier.sum_sq) / 2) == frame["y"].to_numpy()[np.argmax(frame["age"].to_numpy())]

    # Revoked: refused again.
    config = str(server.config.source)
    assert main(["model", "revoke", digest[:12], "--config", config]) == 0
    _refused(calls["BrierParts"], C.PERMISSION_DENIED, "model approval")
    assert main(["model", "list", "--config", config, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.split("revoked: ", 1)[1].split("\n", 1)[1]) == []
    assert [r["call"] for r in read_audit(server.config.audit_path)][-2:] == ["ModelRevoke", "BrierParts"]


def _suppressed_cell_frame():
    """168 patients; calibration bin [0.3, 0.4) holds 2 (1 positive), bin [0.7, 0.8) (10) is the smallest of the others."""
    from site_node.cli.init import sample_dataset

    rng = np.random.default_rng(3)
    sizes = [20, 20, 20, 2, 20, 20, 20, 10, 20, 16]
    pred = np.concatenate([rng.uniform(b / 10 + 0.001, (b + 1) / 10 - 0.001, k) for b, k in enumerate(sizes)])
    frame = sample_dataset(168, seed=3).assign(pred=pred.round(6))
    frame["y"] = (rng.random(168) < pred).astype(int)
    frame.loc[frame["pred"].between(0.3, 0.4), "y"] = [1, 0]
    frame.loc[frame["pred"].between(0.7, 0.8), "y"] = [1, 0] * 5  # 5 of each class: no pairwise rule objects
    return frame


def test_a_suppressed_calibration_cell_cannot_be_recovered_with_a_confusion_matrix(tls_site, snapshot):
    frame = _suppressed_cell_frame()
    server, client = tls_site(frames={"test": frame})
    s = client.open()
    calibration = client.CalibrationParts(pb.CalibrationPartsRequest(session_id=s, n_bins=10))
    assert {3, 7} <= set(calibration.suppressed)
    before = snapshot(server.config.ledger_path), _answered_counts(server)
    # The attack: bin 7 = (tp + fp at 0.7) - released bins above 0.7; bin 3 = n - released - bin 7.
    _refused(lambda: client.ConfusionParts(pb.ConfusionPartsRequest(session_id=s, threshold=0.7)),
             C.PERMISSION_DENIED, "disclosure auditor: the threshold 0.7 refused")
    assert (snapshot(server.config.ledger_path), _answered_counts(server)) == before
    # What the pairwise cut rule let through: dsroc's suppression alone withholds bins 3 and 7, and the
    # confusion row total at 0.7 (an edge, so no band between cuts) recovers both.
    pred, y = frame["pred"].to_numpy(), frame["y"].to_numpy()
    old = calibration_parts(pred, y, np.linspace(0, 1, 11), privacy_level=5)
    assert old.suppressed.tolist() == [3, 7]
    bin7 = int((pred >= 0.7).sum()) - int(old.count[old.bins >= 8].sum())
    assert bin7 == 10 and len(frame) - int(old.count.sum()) - bin7 == 2
    # A threshold that reveals nothing new about a small group is still answered (e.g. at a released edge
    # with whole withheld groups on both sides of at least q).
    answered = [t / 10 for t in range(1, 10)
                if _answered(client, s, t / 10)]
    assert answered and 0.7 not in answered


def _answered(client, session, threshold) -> bool:
    try:
        client.ConfusionParts(pb.ConfusionPartsRequest(session_id=session, threshold=threshold))
        return True
    except grpc.RpcError as exc:
        assert exc.code() == C.PERMISSION_DENIED, exc.details()
        return False


def _answered_counts(server) -> list:
    """The disclosure auditor's record (empty before its first answer)."""
    import sqlite3

    if not server.config.state_dir.joinpath("disclosure.sqlite").exists():
        return []
    with sqlite3.connect(server.config.state_dir / "disclosure.sqlite") as db:
        return sorted(db.execute("SELECT * FROM answered_counts").fetchall())


def test_a_crafted_survivor_function_is_refused_only_signed_releases_are_cut_points(
        tls_site, snapshot, peer_release):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    server, client = tls_site()
    s = client.open()
    info, noisy, _ = client.release(s, NEG)
    assert info.site == server.config.name and len(info.signature) == 64 and info.values_sha256
    before = snapshot(server.config.ledger_path)
    # The attack: S~0 = one analyst-chosen value c; PV0's total under it counts the positives below c.
    for segments in ([], [peer_release(NEG, [0.5], key=Ed25519PrivateKey.generate())]):
        _refused(lambda: client.upload(s, NEG, [0.5], segments=segments), C.PERMISSION_DENIED, "signed releases")
    # The site's own signed release with one value changed, or cut down to one value: refused too.
    forged = noisy.copy()
    forged[0] = 0.5
    _refused(lambda: client.upload(s, NEG, forged, segments=[info]), C.PERMISSION_DENIED, "signature does not match")
    _refused(lambda: client.upload(s, NEG, noisy[:1], segments=[info]), C.INVALID_ARGUMENT, "header.segments announce")
    # header.n left to the segments (0) and fewer scores sent: refused after the stream, by its size alone (the
    # signatures were verified before the first score was read).
    _refused(lambda: client.upload(s, NEG, noisy[:1], n=0, segments=[info]), C.INVALID_ARGUMENT, "header.segments announce")
    # A release of the other class, or the same site twice: refused.
    _refused(lambda: client.upload(s, POS, noisy, segments=[info]), C.INVALID_ARGUMENT, "another score class")
    twice = np.concatenate([noisy, noisy])
    _refused(lambda: client.upload(s, NEG, twice, segments=[info, info]), C.PERMISSION_DENIED, "one release per site")
    assert snapshot(server.config.ledger_path) == before
    _refused(lambda: client.PlacementMoments(pb.PlacementMomentsRequest(session_id=s)), C.FAILED_PRECONDITION)
    # The honest union: its own release and a peer's, unchanged: accepted.
    peer = np.sort(np.random.default_rng(2).normal(0.3, 0.2, 40))
    peer_info = peer_release(NEG, peer)
    up = client.upload(s, NEG, np.concatenate([noisy, peer]), segments=[info, peer_info])
    assert up.n_received == noisy.size + 40
    # The site remembers valid signatures (a repeat costs no verification), but only for the exact
    # message and bytes: a changed field or signature is checked, and refused, again.
    for change in ({"epsilon": 9.0}, {"signature": bytes(64)}):
        altered = pb.ReleaseInfo()
        altered.CopyFrom(peer_info)
        for name, value in change.items():
            setattr(altered, name, value)
        _refused(lambda: client.upload(s, NEG, np.concatenate([noisy, peer]), segments=[info, altered]),
                 C.PERMISSION_DENIED, "signature does not match")
    upload = [r for r in read_audit(server.config.audit_path) if r["call"] == "UploadSurvivor"]
    assert [r["decision"] for r in upload] == ["PERMISSION_DENIED"] * 3 + ["INVALID_ARGUMENT"] * 3 + [
                                                                          "PERMISSION_DENIED", "OK",
                                                                          "PERMISSION_DENIED", "PERMISSION_DENIED"]


def test_a_pair_signature_covers_both_classes_of_one_release_and_is_verified_once(tls_site, snapshot):
    # A release's two classes carry one signature over both (besides each class's own): an upload of both
    # classes costs one verification per site. Every field it covers is checked: the other class's size or
    # digest changed, the negatives presented as positives, or the signature moved to another release are refused.
    from ..conftest import PEER_KEY
    from site_node.security.signing import pair_message, values_digest

    server, client = tls_site()
    s = client.open()
    info0, noisy0, _ = client.release(s, NEG)
    info1, noisy1, _ = client.release(s, POS)
    assert info0.pair_signature == info1.pair_signature and len(info0.pair_signature) == 64
    assert (info0.other_n, info0.other_values_sha256) == (info1.n, info1.values_sha256)
    before = snapshot(server.config.ledger_path)

    def changed(info, **fields):
        out = pb.ReleaseInfo()
        out.CopyFrom(info)
        for name, value in fields.items():
            setattr(out, name, value)
        return out

    other = changed(info1, release_id="another release")
    for segment, values, cls in ((changed(info0, other_n=info0.other_n + 1), noisy0, NEG),
                                 (changed(info0, other_values_sha256=values_digest(noisy0)), noisy0, NEG),
                                 (changed(info0, score_class=POS), noisy0, POS),
                                 (changed(other, pair_signature=info0.pair_signature), noisy1, POS)):
        _refused(lambda: client.upload(s, cls, values, segments=[segment]), C.PERMISSION_DENIED, "signature does not match")
    assert snapshot(server.config.ledger_path) == before
    # A peer's pair-signed release and the site's own, both classes in one stream: one verification per site.
    peer = [np.sort(np.random.default_rng(k).uniform(0, 1, 30 + k)) for k in range(2)]
    fields = {"site": "testpeer", "population": "test", "dataset": "test", "source": "column:pred", "outcome": "y",
              "release_id": "peer release", "epsilon": 1.0, "delta": 1e-5, "sensitivity": 1.0,
              "n_negatives": peer[0].size, "negatives_sha256": values_digest(peer[0]),
              "n_positives": peer[1].size, "positives_sha256": values_digest(peer[1])}
    signature = PEER_KEY.sign(pair_message(fields))
    common = {k: fields[k] for k in ("site", "population", "dataset", "source", "outcome", "release_id", "epsilon",
                                     "delta", "sensitivity")}
    peer_infos = [pb.ReleaseInfo(**common, score_class=cls, n=mine.size, values_sha256=values_digest(mine),
                                 other_n=theirs.size, other_values_sha256=values_digest(theirs),
                                 signature=bytes(64), pair_signature=signature)
                  for cls, mine, theirs in ((NEG, peer[0], peer[1]), (POS, peer[1], peer[0]))]
    signer = server.site.signer
    verified = []

    class Counting:
        def __init__(self, key):
            self.key = key

        def verify(self, signature, message):
            verified.append(message)
            return self.key.verify(signature, message)

    signer._keys = {name: Counting(key) for name, key in signer._keys.items()}
    signer._verified.clear()

    def header(cls, values, segments):
        return pb.SurvivorChunk(header=pb.SurvivorHeader(session_id=s, score_class=cls, n=sum(v.size for v in values),
                                                         segments=segments), scores=np.concatenate(values).tobytes())

    out = client.UploadSurvivors(iter([header(NEG, [noisy0, peer[0]], [info0, peer_infos[0]]),
                                       header(POS, [noisy1, peer[1]], [info1, peer_infos[1]])]))
    assert [r.n_received for r in out.survivors] == [noisy0.size + peer[0].size, noisy1.size + peer[1].size]
    assert len(verified) == 2 and all(b"dsroc_release_pair" in m for m in verified)


def test_an_own_segment_must_be_in_the_ledger(tls_site, tmp_path):
    """A release signed with this site's key but unknown to its ledger (a copied key, a restored backup): refused."""
    from site_node.security.signing import load_signing_key, sign_release, values_digest

    server, client = tls_site()
    s = client.open()
    key = load_signing_key(server.config.signing_key_path)
    values = np.array([0.2, 0.4])
    fields = {"site": server.config.name, "population": "test", "dataset": "test", "source": "column:pred",
              "outcome": "y", "release_id": "not-in-the-ledger", "score_class": NEG, "epsilon": 1.0, "delta": 1e-5,
              "sensitivity": 1.0, "n": 2, "values_sha256": values_digest(values)}
    segment = pb.ReleaseInfo(**fields, signature=sign_release(key, fields))
    _refused(lambda: client.upload(s, NEG, values, segments=[segment]), C.PERMISSION_DENIED,
             "is not in this site's ledger")
