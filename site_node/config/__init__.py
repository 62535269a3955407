"""The site configuration (TOML): listen address, TLS, analysts, privacy policy, datasets."""

from .parse import load_config, parse_config
from .site_config import (FORMATS, PROTOCOLS, SENSITIVITY_RULES, SPACINGS, AnalystConfig, ConfigError, DatasetConfig, Policy,
                          SiteConfig, TlsConfig, is_loopback, source_identity)

__all__ = ["ConfigError", "TlsConfig", "Policy", "AnalystConfig", "DatasetConfig", "SiteConfig", "load_config", "parse_config",
           "SENSITIVITY_RULES", "PROTOCOLS", "SPACINGS", "FORMATS", "source_identity", "is_loopback"]
