"""Wording the text and the figures share: a sentence without its parenthetical asides."""

from __future__ import annotations

import re

__all__ = ["plain"]

_ASIDE = re.compile(r" \([^()]*\)(?=[\s;,.:)]|$)")


def plain(text: str) -> str:
    """``text`` without its parenthetical asides (`` (...)`` followed by a space, punctuation or the end; an aside
    such as ``(epsilon, delta)-DP`` that is part of a word stays): the gist of a guarantee or an interval's scope."""
    while True:
        shorter = _ASIDE.sub("", text)
        if shorter == text:
            return text
        text = shorter
