"""The site configuration (TOML): listen address, TLS, analysts, privacy policy, datasets."""

from .site_config import (FORMATS, PROTOCOLS, SENSITIVITY_RULES, SPACINGS, AnalystConfig, ConfigError, DatasetConfig, Policy,
                          SiteConfig, TlsConfig, is_loopback, source_identity)

__all__ = ["ConfigError", "TlsConfig", "Policy", "AnalystConfig", "DatasetConfig", "SiteConfig", "load_config", "parse_config",
           "SENSITIVITY_RULES", "PROTOCOLS", "SPACINGS", "FORMATS", "source_identity", "is_loopback"]


def __getattr__(name: str):
    # the parser (and the security modules it checks keys with) only where a config is read: the dataset reader's
    # helper process needs DatasetConfig alone
    if name in ("load_config", "parse_config"):
        from . import parse

        return getattr(parse, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
