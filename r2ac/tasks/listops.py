"""ListOps (Nangia & Bowman 2018, as used in the Long Range Arena), generated locally.

Grammar: an expression is a digit 0-9 or ``[OP e1 e2 ... ek ]`` with OP one of

    MAX, MIN      the largest / smallest argument
    MED           the median, truncated to an int like LRA's ``int(np.median(args))`` (an even number of
                  arguments gives the floor of the mean of the two middle values)
    SM            the sum modulo 10 (LRA's SUM_MOD)

The label is the value of the whole expression (0-9, ten classes). Tokens: the digits ``0``..``9``, the
four opening tokens ``[MAX`` ``[MIN`` ``[MED`` ``[SM`` and the closing ``]`` (LRA's files also wrap the
tree in round brackets; we leave those out). Inputs are one-hot over these 15 tokens.

``generate_expression`` draws a random tree (root: an operator; each argument is an operator with
probability ``p_op`` while depth < ``max_depth``, else a digit; 2..``max_args`` arguments) and redraws until
its token length is in [``min_length``, ``max_length``]. LRA uses depth <= 10, <= 10 arguments and lengths
up to 2000; the defaults here are small for CPU runs.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple, Union

import numpy as np

from r2ac.tasks.sequence import SequenceBatch, as_rng

OPS = ("MAX", "MIN", "MED", "SM")
TOKENS: Tuple[str, ...] = tuple(str(d) for d in range(10)) + tuple("[" + op for op in OPS) + ("]",)
TOKEN_ID = {t: i for i, t in enumerate(TOKENS)}
VOCAB = len(TOKENS)

Tree = Union[int, Tuple[str, list]]


def apply_op(op: str, args: Sequence[int]) -> int:
    if not args:
        raise ValueError(f"{op} needs at least one argument")
    if op == "MAX":
        return max(args)
    if op == "MIN":
        return min(args)
    if op == "SM":
        return sum(args) % 10
    if op == "MED":
        s = sorted(args)
        n = len(s)
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2  # int(np.median) for ints >= 0
    raise ValueError(f"unknown operator {op!r}")


def evaluate(tokens: Union[str, Sequence[str]]) -> int:
    """Value of a ListOps expression given as tokens (or one whitespace-separated string)."""
    if isinstance(tokens, str):
        tokens = tokens.split()
    stack: List[Tuple[str, List[int]]] = []
    result = None
    for i, tok in enumerate(tokens):
        if result is not None:
            raise ValueError(f"tokens after the end of the expression at position {i}: {tok!r}")
        if tok.startswith("["):
            op = tok[1:]
            if op not in OPS:
                raise ValueError(f"unknown operator token {tok!r}")
            stack.append((op, []))
        elif tok == "]":
            if not stack:
                raise ValueError(f"unbalanced ']' at position {i}")
            op, args = stack.pop()
            v = apply_op(op, args)
            if stack:
                stack[-1][1].append(v)
            else:
                result = v
        elif tok.isdigit() and len(tok) == 1:
            if not stack:
                if len(tokens) == 1:
                    return int(tok)
                raise ValueError(f"digit {tok!r} outside any operator at position {i}")
            stack[-1][1].append(int(tok))
        else:
            raise ValueError(f"unknown token {tok!r}")
    if stack or result is None:
        raise ValueError("unbalanced expression: missing ']'")
    return result


def tree_tokens(tree: Tree) -> List[str]:
    if isinstance(tree, int):
        return [str(tree)]
    op, args = tree
    out = ["[" + op]
    for a in args:
        out += tree_tokens(a)
    return out + ["]"]


def tree_value(tree: Tree) -> int:
    if isinstance(tree, int):
        return tree
    op, args = tree
    return apply_op(op, [tree_value(a) for a in args])


def _draw_tree(rng: np.random.Generator, depth: int, max_depth: int, max_args: int, p_op: float) -> Tree:
    if depth > 0 and (depth >= max_depth or rng.random() >= p_op):
        return int(rng.integers(0, 10))
    op = OPS[int(rng.integers(0, len(OPS)))]
    n = int(rng.integers(2, max_args + 1))
    return (op, [_draw_tree(rng, depth + 1, max_depth, max_args, p_op) for _ in range(n)])


def generate_expression(rng=None, max_depth: int = 3, max_args: int = 5, min_length: int = 5,
                        max_length: int = 60, p_op: float = 0.3, max_tries: int = 10_000) -> Tuple[List[str], int]:
    """A random expression (tokens) and its label."""
    if max_depth < 1 or max_args < 2 or min_length > max_length:
        raise ValueError("need max_depth >= 1, max_args >= 2, min_length <= max_length")
    rng = as_rng(rng)
    for _ in range(max_tries):
        tree = _draw_tree(rng, 0, max_depth, max_args, p_op)
        toks = tree_tokens(tree)
        if min_length <= len(toks) <= max_length:
            return toks, tree_value(tree)
    raise RuntimeError(f"no expression with {min_length} <= length <= {max_length} in {max_tries} draws; "
                       "loosen the bounds")


def encode(tokens: Sequence[str]) -> np.ndarray:
    return np.array([TOKEN_ID[t] for t in tokens], np.int64)


def listops_batch(batch: int, rng=None, **kw) -> SequenceBatch:
    """A batch of expressions, one-hot inputs [T, B, 15] (T = the longest in the batch), the label as the
    target at every real step (Zucchet et al. 2023 trains with a loss at every step and averages the logits over the
    sequence at inference); ``mask`` marks the real steps."""
    rng = as_rng(rng)
    exprs = [generate_expression(rng, **kw) for _ in range(batch)]
    T = max(len(t) for t, _ in exprs)
    x = np.zeros((T, batch, VOCAB), np.float32)
    y = np.zeros((T, batch), np.int64)
    mask = np.zeros((T, batch), bool)
    lengths = np.zeros(batch, np.int64)
    for b, (toks, label) in enumerate(exprs):
        n = len(toks)
        x[np.arange(n), b, encode(toks)] = 1.0
        y[:n, b] = label
        mask[:n, b] = True
        lengths[b] = n
    return SequenceBatch(x=x, y=y, mask=mask, lengths=lengths, kind="class", n_classes=10)
