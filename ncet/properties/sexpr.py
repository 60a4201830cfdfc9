"""S-expressions: VNN-LIB text read form by form, with every token's place kept for errors.

The text is scanned one top-level form at a time. A form of the two shapes that make up
nearly all of VNN-COMP's files, `(declare-const NAME SORT)` and `(assert (OP A B))` with A
and B single words, is taken whole by one regular expression (`SIMPLE`) and handed over as
its words; any other form is cut into tokens and nested into lists. A nested form is a
Python list: its first item is the index of its "(" token, the others its children, each the
index of an atom token (an int), a nested list, or the match of a comparison of two words
(`COMPARISON`, a leaf: the shape of nearly every comparison inside an `or` or `and`). Line
and column are computed only when an error needs them, from the token's offset in the text.
"""

from __future__ import annotations

import re

from .errors import VNNLIBError

TOKEN = re.compile(r';[^\n]*|"(?:[^"]|"")*"|\|[^|]*\||\(|\)|[^\s();"|]+')
"""A comment (to the end of the line), an SMT-LIB string literal ("..." with "" for a
quote) or quoted symbol (|...|), a parenthesis, or an atom (anything else up to whitespace,
a parenthesis, a quote or a comment)."""

SKIP = re.compile(r"(?:\s+|;[^\n]*)*")
"""Whitespace and comments between forms."""

_WORD = r"([^\s();]+)"
SIMPLE = re.compile(r"\(\s*(?:declare-const\s+" + _WORD + r"\s+" + _WORD +
                    r"|assert\s+\(\s*(<=|>=|<|>)\s+" + _WORD + r"\s+" + _WORD +
                    r"\s*\))\s*\)")
"""(declare-const NAME SORT) (groups 1, 2) or (assert (OP A B)) (groups 3, 4, 5)."""

COMPARISON = re.compile(r"\(\s*(<=|>=|<|>)\s+" + _WORD + r"\s+" + _WORD + r"\s*\)")
"""(OP A B) inside a form (groups 1, 2, 3): taken whole, as a leaf, by `form_at`."""

MAX_DEPTH = 100
"""The deepest nesting read; VNN-COMP's files nest at most 5 deep."""


class SExpressions:
    """The forms of one text (`scan`), the tokens of those nested, and where each is."""

    def __init__(self, text: str, source: str = "<text>"):
        self.text, self.source = text, source
        self.tokens: list[str] = []
        self.offsets: list[int] = []

    def scan(self):
        """Each top-level form in order: a `SIMPLE` match, or a nested form (a list)."""
        text, n = self.text, len(self.text)
        simple, skip = SIMPLE.match, SKIP.match
        pos = skip(text, 0).end()
        while pos < n:
            first = text[pos]
            if first == "(":
                match = simple(text, pos)
                if match is not None:
                    yield match
                    pos = match.end()
                else:
                    form, pos = self.form_at(pos)
                    yield form
            elif first == ")":
                raise self.error_at("vnnlib-unbalanced", "this ')' closes nothing", pos)
            else:
                raise self.error_at("vnnlib-unexpected-token", "a word outside any command "
                                    "(every command is a list)", pos)
            pos = skip(text, pos).end()

    def form_at(self, pos: int, leaves: bool = True) -> tuple[list, int]:
        """The form whose "(" is at offset `pos`, nested, and the offset after it. With
        `leaves`, a `COMPARISON` inside it is kept whole, as its match (`words`, `reparse`)."""
        tokens, offsets, text = self.tokens, self.offsets, self.text
        search, comparison = TOKEN.search, COMPARISON.match
        stack: list[list] = []
        top = current = None
        while True:
            match = search(text, pos)
            if match is None:
                raise self.error("vnnlib-unbalanced", "this '(' is never closed", top[0])
            token, start = match.group(), match.start()
            pos = match.end()
            first = token[0]
            if first == ";":
                continue
            if first == "(" and current is not None and leaves:
                leaf = comparison(text, start)
                if leaf is not None:
                    current.append(leaf)
                    pos = leaf.end()
                    continue
            i = len(tokens)
            tokens.append(token)
            offsets.append(start)
            if first == "(":
                form = [i]
                if current is None:
                    top = form
                else:
                    current.append(form)
                    stack.append(current)
                    if len(stack) >= MAX_DEPTH:
                        raise self.error("vnnlib-too-deep",
                                         f"expressions nested more than {MAX_DEPTH} deep", i)
                current = form
            elif first == ")":
                if not stack:
                    return top, pos
                current = stack.pop()
            else:
                current.append(i)

    @staticmethod
    def words(match) -> tuple[str, str, str]:
        """(OP, A, B) of a `SIMPLE` assert's or a `COMPARISON` leaf's match."""
        return match.group(3, 4, 5) if match.re is SIMPLE else match.group(1, 2, 3)

    def reparse(self, match) -> list:
        """The comparison of a `SIMPLE` assert's or a `COMPARISON` leaf's match, nested token
        by token (for the general path and its errors)."""
        if match.re is SIMPLE:
            return self.form_at(match.start(), leaves=False)[0][2]
        return self.form_at(match.start(), leaves=False)[0]

    def where(self, offset: int) -> tuple[int, int]:
        """The 1-based line and column of the character at `offset`."""
        return (self.text.count("\n", 0, offset) + 1,
                offset - self.text.rfind("\n", 0, offset))

    def error_at(self, code: str, message: str, offset: int) -> VNNLIBError:
        """A VNNLIBError at the token starting at `offset`."""
        line, column = self.where(offset)
        match = TOKEN.match(self.text, offset)
        return VNNLIBError(code, message, line=line, column=column,
                           token=match.group() if match else "", source=self.source)

    def error(self, code: str, message: str, at: int | list) -> VNNLIBError:
        """A VNNLIBError at token `at` (an index, or a form: its head, else its "(")."""
        if isinstance(at, list):
            at = at[1] if len(at) > 1 and isinstance(at[1], int) else at[0]
        return self.error_at(code, message, self.offsets[at])

    def text_of(self, form) -> str:
        """The form as text, one space between tokens (for messages)."""
        if isinstance(form, int):
            return self.tokens[form]
        if not isinstance(form, list):  # a leaf's match
            return "(" + " ".join(self.words(form)) + ")"
        return "(" + " ".join(self.text_of(child) for child in form[1:]) + ")"
