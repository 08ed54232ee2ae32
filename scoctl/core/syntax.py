"""Small pure text helpers shared by the parsers of outside formats (GRES, hostlists, selectors)."""

from __future__ import annotations


def split_top_level(text: str, brackets: str = "()") -> list[str]:
    """Split `text` on the commas outside `brackets` (an opening and a closing character).

    ``IDX:0,2`` inside ``(…)`` stays whole for GRES, ``n[1-3,5]`` inside ``[…]`` for hostlists,
    ``a in (x,y)`` for label selectors. Raises ValueError when the brackets are unbalanced.
    """
    opening, closing = brackets[0], brackets[1]
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced {closing!r} in {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise ValueError(f"unbalanced {opening!r} in {text!r}")
    parts.append("".join(current))
    return parts
