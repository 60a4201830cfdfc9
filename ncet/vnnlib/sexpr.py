"""S-expressions: VNN-LIB text cut into tokens and nested into lists, with every token's
place kept for error messages.

A parsed form is a Python list: its first item is the index of its "(" token, the others its
children, each the index of an atom token (an int) or a nested list. Positions are computed
only when an error needs one (`SExpressions.where`), so reading a large file costs one regular
expression pass and one loop over the tokens.
"""

from __future__ import annotations

import re

from .errors import VNNLIBError

TOKEN = re.compile(r";[^\n]*|\(|\)|[^\s();]+")
"""A comment (to the end of the line), a parenthesis, or an atom (anything else up to
whitespace, a parenthesis or a comment)."""

MAX_DEPTH = 100
"""The deepest nesting read; VNN-COMP's files nest at most 5 deep."""


class SExpressions:
    """The tokens of one text, its top-level forms, and where each token is."""

    def __init__(self, text: str, source: str = "<text>"):
        self.text, self.source = text, source
        self.tokens: list[str] = TOKEN.findall(text)
        self.forms: list[list] = self._nest()

    def _nest(self) -> list[list]:
        tokens = self.tokens
        top: list = []
        stack: list[list] = []
        current = top
        for i, token in enumerate(tokens):
            first = token[0]
            if first == "(":
                form = [i]
                current.append(form)
                stack.append(current)
                current = form
                if len(stack) > MAX_DEPTH:
                    raise self.error("vnnlib-too-deep",
                                     f"expressions nested more than {MAX_DEPTH} deep", i)
            elif first == ")":
                if not stack:
                    raise self.error("vnnlib-unbalanced", "this ')' closes nothing", i)
                current = stack.pop()
            elif first == ";":
                continue
            elif not stack:
                raise self.error("vnnlib-unexpected-token",
                                 "a word outside any command (every command is a list)", i)
            else:
                current.append(i)
        if stack:
            raise self.error("vnnlib-unbalanced", "this '(' is never closed", top[-1][0])
        return top

    def where(self, index: int) -> tuple[int, int]:
        """The 1-based line and column of token `index`."""
        for k, match in enumerate(TOKEN.finditer(self.text)):
            if k == index:
                start = match.start()
                line = self.text.count("\n", 0, start) + 1
                return line, start - self.text.rfind("\n", 0, start)
        return self.text.count("\n") + 1, 1  # pragma: no cover - indices come from tokens

    def error(self, code: str, message: str, at: int | list) -> VNNLIBError:
        """A VNNLIBError at token `at` (an index, or a form: its head, else its "(")."""
        if isinstance(at, list):
            at = at[1] if len(at) > 1 and isinstance(at[1], int) else at[0]
        line, column = self.where(at)
        return VNNLIBError(code, message, line=line, column=column, token=self.tokens[at],
                           source=self.source)

    def text_of(self, form: list | int) -> str:
        """The form as text, one space between tokens (for messages)."""
        if isinstance(form, int):
            return self.tokens[form]
        return "(" + " ".join(self.text_of(child) for child in form[1:]) + ")"
