"""``dsroc-site model approve|list|revoke`` (approvals of analyst models) and ``dsroc-site key`` (the release-signing key)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["add_model_parser"]


def _cmd_key(args) -> int:
    from ..config import load_config
    from ..security.signing import ensure_signing_key, public_key_text

    config = load_config(args.config)
    key = public_key_text(ensure_signing_key(config.signing_key_path))
    print(f"# this site's release-signing public key: add to every peer site's config\n"
          f'[peers.{json.dumps(config.name)}]\npublic_key = "{key}"')
    return 0


def _audit(config, call: str, parameters: dict) -> None:
    from ..interceptors.audit import AuditLog, AuditRecord

    AuditLog.for_config(config).write(
        AuditRecord("", call, peer="dsroc-site model (site administrator)", parameters=parameters))


def _cmd_model(args) -> int:
    from ..config import load_config
    from ..rules.approvals import ModelApprovals, model_from_json
    from ..store.state import check_state

    config = load_config(args.config)
    check_state(config)
    if args.action == "list" and not config.approvals_path.exists():  # a read-only command creates no state
        print("[]" if args.json else "no approved models: analysts' GLMs get histogram-protocol answers only")
        return 0
    approvals = ModelApprovals(config.approvals_path)
    try:
        if args.action == "approve":
            path = Path(args.file)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"cannot read the model file {path}: {exc.strerror}") from None
            spec = model_from_json(text, name=str(path))
            digest, new = approvals.approve(spec, note=args.note)
            _audit(config, "ModelApprove", {"model_sha256": digest, "source": spec.key, "new": new})
            print(f"{'approved' if new else 'already approved'}: {digest}  {spec.key}")
        elif args.action == "revoke":
            source = approvals.revoke(args.hash)
            if source is None:
                raise ValueError(f"no single approved model has a sha256 starting with {args.hash!r} "
                                 "(give at least 8 hex digits; see dsroc-site model list)")
            _audit(config, "ModelRevoke", {"model_sha256_prefix": args.hash, "source": source})
            print(f"revoked: {source}")
        else:
            rows = approvals.list()
            if args.json:
                print(json.dumps(rows, indent=2))
            for row in [] if args.json else rows:
                note = f"  ({row['note']})" if row["note"] else ""
                print(f"{row['approved']}  {row['model_sha256']}  {row['source']}{note}")
            if not rows and not args.json:
                print("no approved models: analysts' GLMs get histogram-protocol answers only")
    finally:
        approvals.close()
    return 0


def add_model_parser(sub) -> None:
    """Add ``model`` with its actions to the ``dsroc-site`` subcommands."""
    p = sub.add_parser(
        "model", help="approve, list or revoke analyst models for the paper protocol",
        description="The paper protocol answers exact aggregates about a model's scores; a sharp model can turn "
        "them into one patient's outcome. So an analyst's GLM gets paper-protocol answers only when approved here "
        "(stored by the SHA-256 of its canonical form, every change audited). The histogram protocol needs no "
        "approval.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser("approve", help="approve the GLM in FILE",
                           description='FILE holds the analyst\'s GLM as JSON: {"link": "logit", "intercept": b0, '
                           '"coefficients": {"column": b, ...}} (the analyst CLI\'s --model format).')
    a.add_argument("file", metavar="FILE")
    a.add_argument("--note", default="", help="why it was approved (kept with the approval)")
    r = actions.add_parser("revoke", help="withdraw an approval by its sha256 (a unique prefix of 8+ digits)")
    r.add_argument("hash", metavar="SHA256")
    lst = actions.add_parser("list", help="every approved model")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    for q in (a, r, lst):
        q.add_argument("--config", required=True, help="site TOML file")
        q.set_defaults(func=_cmd_model)

    k = sub.add_parser(
        "key", help="print this site's release-signing public key as a [peers.NAME] table for the other sites",
        description="Each site signs its noisy-score releases (Ed25519; the key is state/release_signing.key, "
        "created on first use) and accepts survivor functions only as unions of releases signed by itself or a "
        "peer listed in its config. Print the table to add to every other site's config.")
    k.add_argument("--config", required=True, help="site TOML file")
    k.set_defaults(func=_cmd_key)
