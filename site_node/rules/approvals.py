"""Models the site administrator approved for the paper protocol, stored by the hash of their canonical form.

The paper protocol answers exact aggregates (Brier parts, placement moments, counts) about whatever
scores a model gives; a sharp analyst model (a step at one patient's age, say) turns them into that
patient's outcome. So an analyst's GLM gets paper-protocol answers only once the site approved it
(``dsroc-site model approve FILE``); the histogram protocol's answers are differentially private
whatever the model and need no approval.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

import dsroc  # GlmModel is looked up at first use: dsroc.glm_model imports scipy.special

from ..data.scores import ScoreSpec
from ..store.sqlite_files import PrivateStore

__all__ = ["ModelApprovals", "approve_model", "model_from_json", "model_hash"]


def model_hash(spec: ScoreSpec) -> str:
    """The SHA-256 of a model's canonical text (:attr:`ScoreSpec.key`): what an approval names."""
    return hashlib.sha256(spec.key.encode("utf-8")).hexdigest()


def model_from_json(text: str, *, name: str = "model file") -> ScoreSpec:
    """A GLM score source from the analyst's JSON: ``{"link": ..., "intercept": ..., "coefficients": {...}}``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or set(data) - {"link", "intercept", "coefficients"} \
            or not isinstance(data.get("coefficients"), dict):
        raise ValueError(f'{name} must hold {{"link": "logit"|"probit", "intercept": b0, "coefficients": '
                         '{"column": b, ...}} and nothing else')
    try:
        # Floats, as they arrive over the wire: the canonical text of 0 and 0.0 must be the same.
        model = dsroc.GlmModel(link=data.get("link", "logit"), intercept=float(data.get("intercept", 0.0)),
                               coefficients={str(k): float(v) for k, v in data["coefficients"].items()})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: {exc}") from None
    return ScoreSpec(model=model)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS approved_models (
    model_sha256 TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    approved TEXT NOT NULL,
    note TEXT NOT NULL
);
"""


class ModelApprovals(PrivateStore):
    """The approved models of a site, in one SQLite file (each change a single transaction)."""

    def __init__(self, path):
        super().__init__(path, _SCHEMA)

    def approve(self, spec: ScoreSpec, *, note: str = "") -> tuple[str, bool]:
        """Approve a model; returns its hash and whether it is new (approving twice changes nothing)."""
        digest = model_hash(spec)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock:
            cursor = self._db.execute("INSERT OR IGNORE INTO approved_models VALUES (?,?,?,?)",
                                      (digest, spec.key, now, note))
        return digest, cursor.rowcount == 1

    def revoke(self, digest: str) -> str | None:
        """Withdraw an approval by hash (or a unique prefix of at least 8 digits); the revoked model's text, or None."""
        digest = digest.strip().lower()
        if len(digest) < 8:
            return None
        with self._lock:
            rows = self._db.execute("SELECT model_sha256, source FROM approved_models WHERE model_sha256 LIKE ?",
                                    (digest + "%",)).fetchall()
            if len(rows) != 1:
                return None
            self._db.execute("DELETE FROM approved_models WHERE model_sha256 = ?", (rows[0][0],))
        return rows[0][1]

    def is_approved(self, spec: ScoreSpec) -> bool:
        """Whether the model (canonical form) is approved."""
        with self._lock:
            return self._db.execute("SELECT 1 FROM approved_models WHERE model_sha256 = ?",
                                    (model_hash(spec),)).fetchone() is not None

    def list(self) -> list[dict]:
        """Every approval, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT model_sha256, source, approved, note FROM approved_models ORDER BY approved, rowid").fetchall()
        return [dict(zip(("model_sha256", "source", "approved", "note"), row)) for row in rows]


def approve_model(config, model, *, note: str = "") -> str:
    """Approve ``model`` (a mapping in the JSON form or a :class:`dsroc.GlmModel`) at the site of ``config``.

    What ``dsroc-site model approve`` does, for scripts and the demo; ``config`` is a
    :class:`~site_node.config.SiteConfig` or the path of its TOML file. Returns the model's hash.
    """
    if not hasattr(config, "approvals_path"):
        from ..config import load_config

        config = load_config(config)
    if isinstance(model, dsroc.GlmModel):
        model = {"link": model.link, "intercept": model.intercept, "coefficients": dict(model.coefficients)}
    approvals = ModelApprovals(config.approvals_path)
    try:
        spec = model_from_json(json.dumps(dict(model)))
        digest, _ = approvals.approve(spec, note=note)
    finally:
        approvals.close()
    return digest
