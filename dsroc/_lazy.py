"""Lazy re-exports for the dsroc packages (PEP 562): a name's submodule is imported on its first use."""

from __future__ import annotations

import sys
import types
from importlib import import_module

__all__ = ["export_lazily"]


class _Package(types.ModuleType):
    """A package whose exported names may share a submodule's name (``rocglm_band``).

    The import system sets a submodule on its package when the submodule is first imported; for an
    exported function of the same name that would replace the function by the module, so it is skipped.
    """

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and name in self.__dict__.get("_EXPORTS", ()):
            return
        super().__setattr__(name, value)


def export_lazily(package: str, exports: dict[str, str], subpackages: tuple[str, ...] = ()) -> None:
    """Make ``package`` resolve each exported name from its submodule on first access.

    Parameters
    ----------
    package : str
        The package's ``__name__``; it must already define ``__all__`` and be in ``sys.modules``.
    exports : dict of str to str
        Exported name -> submodule (relative to ``package``) that defines it.
    subpackages : tuple of str
        Submodules exported as themselves (``dsroc.mechanisms``), imported on first access.
    """
    module = sys.modules[package]

    def __getattr__(name: str):
        source = exports.get(name)
        if source is not None:
            value = getattr(import_module(f".{source}", package), name)
        elif name in subpackages:
            value = import_module(f".{name}", package)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module.__dict__[name] = value  # later lookups skip this function
        return value

    def __dir__():
        return sorted(set(module.__dict__) | set(module.__all__))

    module._EXPORTS = exports
    module.__getattr__ = __getattr__
    module.__dir__ = __dir__
    module.__class__ = _Package
