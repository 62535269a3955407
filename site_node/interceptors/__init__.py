"""The gRPC server interceptor and its helpers: bearer tokens, per-analyst call slots, the audit log."""

from .audit import AuditLog, AuditRecord, audit_files, note, part, read_audit
from .auth import AuthAuditInterceptor, current_analyst, hash_token, new_token, request_parameters
from .slots import CallSlots

__all__ = ["AuditLog", "AuditRecord", "audit_files", "note", "part", "read_audit", "AuthAuditInterceptor",
           "current_analyst", "hash_token", "new_token", "request_parameters", "CallSlots"]
