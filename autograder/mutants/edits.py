"""The edits students make, applied to the reference: each a Mutant of one solution file, with the sentence that says
the mistake in a student's words.

Every edit is made to code between a solution's `# BEGIN SOLUTION` and `# END SOLUTION` (what students write), by an
operator that walks the function's syntax tree: a variable in place of a related one, a function call, term, factor,
sign or transpose dropped, a function swapped for its sibling (sum/mean, log/log2, softmax/log_softmax), a `dim` or
`axis` changed, a range, slice or index one off, a function applied before an operation instead of after it, state
not carried from one loop step to the next, an initial value changed. The sentence names the function and the API's or
the code's own names ("in rnn_forward, every step starts from h0 instead of the h carried over from the step before"),
never more of the reference's code than a short expression its docstring could show.
"""
from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

SHORT = 36  # the longest expression a sentence quotes; a longer one is described in words
# A function whose dropped application a student makes, by its name in torch, numpy or math (function or method)
APPLIED = {"tanh", "sigmoid", "relu", "exp", "log", "sqrt", "softmax", "log_softmax", "abs", "gelu", "rsqrt", "log1p",
           "logsigmoid", "logsumexp", "tril", "triu", "squeeze", "unsqueeze", "clone", "float", "double", "detach"}
SIBLINGS = {"sum": ("mean",), "mean": ("sum",), "log": ("log2", "log10"), "log2": ("log",), "log10": ("log",),
            "softmax": ("log_softmax",), "log_softmax": ("softmax",), "max": ("min",), "min": ("max",),
            "argmax": ("argmin",), "argmin": ("argmax",), "amax": ("amin",), "sigmoid": ("tanh",), "tanh": ("sigmoid",),
            "tril": ("triu",), "triu": ("tril",), "logaddexp": ("log",), "exp": ("exp2",)}
TRANSPOSES = {"T", "mT"}
OPS = {ast.Add: "sum", ast.Sub: "difference", ast.Mult: "product", ast.Div: "quotient", ast.MatMult: "matrix product"}
COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}  # with equality <-> without
SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass(frozen=True)
class Mutant:
    """solutions/`file` with the characters [start, end) replaced by `text`, an edit in `function` (a qualname) of the
    statement that starts on `line`: a mutant can change nothing where that line never runs."""

    file: str
    function: str
    line: int
    start: int
    end: int
    text: str
    sentence: str
    kind: str

    def source(self, original: str) -> str:
        return original[: self.start] + self.text + original[self.end:]

    @property
    def key(self) -> str:
        return f"{self.file}:{self.start}:{self.end}:{self.text}"


def generate(file: str, source: str) -> list[Mutant]:
    """Every mutant of `source` (solutions/`file`), one per distinct edited source, in the order of the code."""
    tree = ast.parse(source)
    solution = _solution_lines(source)
    starts = _line_starts(source)
    found: dict[str, Mutant] = {}
    for qualname, fn, cls in _functions(tree):
        if any(isinstance(n, ast.While) for n in ast.walk(fn)):
            continue  # an edit could make it loop forever, and mutants run in the grader's own process
        scope = _Scope(fn, cls)
        statements = {node: statement for statement in ast.walk(fn) if isinstance(statement, ast.stmt)
                      for node in ast.walk(statement)}  # the innermost statement wins: ast.walk goes outside in
        for node, replacement, sentence, kind in _edits(fn, scope):
            if node.lineno not in solution:
                continue
            start, end = _offset(source, starts, node.lineno, node.col_offset), _offset(source, starts, node.end_lineno, node.end_col_offset)
            mutant = Mutant(file, qualname, statements[node].lineno, start, end, replacement, f"in {qualname}, {sentence}", kind)
            edited = mutant.source(source)
            if edited != source and edited not in found and _compiles(edited):
                found[edited] = mutant
    return list(found.values())


def _compiles(source: str) -> bool:
    try:
        compile(source, "<mutant>", "exec")
        return True
    except SyntaxError:
        return False


def _solution_lines(source: str) -> set[int]:
    lines, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        if "# BEGIN SOLUTION" in line:
            inside = True
        elif "# END SOLUTION" in line:
            inside = False
        elif inside:
            lines.add(number)
    return lines


def _line_starts(source: str) -> list[int]:
    starts, at = [0], 0
    for line in source.splitlines(keepends=True):
        at += len(line)
        starts.append(at)
    return starts


def _offset(source: str, starts: list[int], line: int, col: int) -> int:
    """ast's (line, UTF-8 byte column) as a character offset."""
    text = source[starts[line - 1]: starts[line]]
    return starts[line - 1] + len(text.encode()[:col].decode())


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef, ast.ClassDef | None]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node, None
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item, node


class _Scope:
    """A function's own names: its parameters and locals, and the attributes its class sets on self."""

    def __init__(self, fn: ast.FunctionDef, cls: ast.ClassDef | None):
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        stored = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        self.names = [n for n in dict.fromkeys(params + stored) if n != "self"]
        self.attributes = sorted({n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                                  and isinstance(n.value, ast.Name) and n.value.id == "self"}) if cls else []


def _related(a: str, b: str) -> bool:
    """Names a student may write one for the other: K and V, h and h0, W_xh and W_hh, x and x_t."""
    if a == b:
        return False
    if len(a) == 1 and len(b) == 1:
        return True
    return a[0].lower() == b[0].lower()


def _short(node: ast.AST) -> str | None:
    text = ast.unparse(node).replace("self.", "")
    return text if len(text) <= SHORT else None


def _text(node: ast.AST) -> str:
    """A replacement's source: parenthesized unless it is atomic, so that it keeps its meaning wherever it goes."""
    text = ast.unparse(node)
    return text if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)) else f"({text})"


def _called(node: ast.Call) -> str | None:
    """The name a call is made by: `tanh` for torch.tanh(x), F.tanh(x) and x.tanh()."""
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _is_method(node: ast.Call) -> bool:
    """x.exp() rather than torch.exp(x): the receiver is not a module."""
    f = node.func
    return isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id in ("torch", "F", "np", "math", "nn"))


def _int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _number(node: ast.AST) -> int | float | None:
    """The value of a number written in the code (a negative one too), or None."""
    return node.value if isinstance(node, ast.Constant) and type(node.value) is float else _int(node)


def _plus(node: ast.AST, k: int) -> str:
    value = _int(node)
    if value is not None:
        return str(value + k)
    return f"{_text(node)} {'+' if k > 0 else '-'} {abs(k)}"


Edit = tuple[ast.AST, str, str, str]  # the node replaced, its replacement's source, the sentence, the operator


def _edits(fn: ast.FunctionDef, scope: _Scope) -> Iterator[Edit]:
    parents = {child: parent for parent in ast.walk(fn) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in scope.names:
            for other in scope.names:
                if _related(node.id, other):
                    yield node, other, f"{other} is used where {node.id} belongs", "variable"
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            yield from _attribute(node, scope)
        elif isinstance(node, ast.Call):
            yield from _call(node, parents)
        elif isinstance(node, ast.BinOp):
            yield from _binop(node)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert, ast.Not)):
            what = "a minus sign is missing" if isinstance(node.op, ast.USub) else "a negation is missing (the condition means the reverse)"
            shown = _short(node.operand)
            yield node, _text(node.operand), f"{what}{f' before {shown}' if shown else ''}", "sign"
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARE:
            other = COMPARE[type(node.ops[0])]
            edited = copy.copy(node)
            edited.ops = [other()]
            which = "includes" if other in (ast.LtE, ast.GtE) else "leaves out"
            yield node, _text(edited), f"a comparison {which} equality ({SYMBOL[other]} where {SYMBOL[type(node.ops[0])]} belongs)", \
                "comparison"
        elif isinstance(node, ast.Subscript):
            yield from _subscript(node)
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2:
            a, b = node.value.elts
            yield node.value, f"{_text(b)}, {_text(a)}", "the two results are returned in the wrong order", "order"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            yield from _unpacked(node.targets[0])
        elif isinstance(node, (ast.For, ast.While)):
            yield from _loop(fn, node)


def _attribute(node: ast.Attribute, scope: _Scope) -> Iterator[Edit]:
    if node.attr in TRANSPOSES:
        shown = _short(node.value) or "a matrix"
        yield node, _text(node.value), f"{shown} is used untransposed where its transpose belongs", "transpose"
    if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in scope.attributes:
        for other in scope.attributes:
            if _related(node.attr, other):
                yield node, f"self.{other}", f"{other} is used where {node.attr} belongs", "variable"


def _call(node: ast.Call, parents: dict) -> Iterator[Edit]:
    name = _called(node)
    if name is None:
        return
    method = _is_method(node)
    target = node.func.value if method else node.args[0] if node.args else None
    if name in APPLIED and target is not None:
        shown = _short(target)
        yield node, _text(target), f"{name} is not applied{f' to {shown}' if shown else ''}", "call"
    if name in ("transpose", "t") and method:
        shown = _short(target) or "a matrix"
        yield node, _text(target), f"{shown} is used untransposed where its transpose belongs", "transpose"
    for sibling in SIBLINGS.get(name, ()):
        edited = copy.deepcopy(node)
        if isinstance(edited.func, ast.Attribute):
            edited.func.attr = sibling
        else:
            edited.func.id = sibling
        yield node, ast.unparse(edited), f"{sibling} is used where {name} belongs", "sibling"
    for i, keyword in enumerate(node.keywords):
        yield from _keyword(node, i, keyword, name)
    positional_dim = {"softmax": 1, "log_softmax": 1, "cat": 1, "stack": 1, "chunk": 2, "unbind": 1}.get(name)
    if positional_dim is not None and method:
        positional_dim -= 1
    if positional_dim is not None and len(node.args) > positional_dim and _int(node.args[positional_dim]) is not None:
        yield from _dims(node, node.args[positional_dim], name, "dim")
    if name == "range":
        loop = parents.get(node)
        over = f" over {loop.target.id}" if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) else ""
        bounds = [("stops", node.args[-1])] + ([("starts", node.args[0])] if len(node.args) > 1 else [])
        for which, bound in bounds:
            for k in (1, -1):
                sentence = f"the loop{over} {which} one step {'late' if k > 0 else 'early'}" if which == "starts" else \
                    f"the loop{over} runs one step {'too far' if k > 0 else 'short'} (it stops one step {'late' if k > 0 else 'early'})"
                yield bound, _plus(bound, k), sentence, "off-by-one"


def _keyword(node: ast.Call, i: int, keyword: ast.keyword, name: str) -> Iterator[Edit]:
    if keyword.arg in ("dim", "axis") and _int(keyword.value) is not None:
        yield from _dims(node, keyword.value, name, keyword.arg)
    elif keyword.arg in ("diagonal", "k") and _int(keyword.value) is not None:
        for k in (1, -1):
            yield keyword.value, _plus(keyword.value, k), f"{name}'s {keyword.arg} is one off ({_plus(keyword.value, k)} where " \
                f"{_int(keyword.value)} belongs)", "off-by-one"
    elif isinstance(keyword.value, ast.Constant) and type(keyword.value.value) is bool:
        flipped = not keyword.value.value
        yield keyword.value, str(flipped), f"{name} is called with {keyword.arg}={flipped}", "keyword"
    elif keyword.arg in ("unbiased", "correction", "ddof"):
        edited = copy.deepcopy(node)
        del edited.keywords[i]
        yield node, ast.unparse(edited), f"{name} takes the default {keyword.arg}: the unbiased estimate (divided by n - 1) " \
            "where the biased one (divided by n) belongs", "sibling"


def _dims(node: ast.Call, dim: ast.AST, name: str, word: str) -> Iterator[Edit]:
    k = _int(dim)
    for other in sorted({k - 1, k + 1, -1, 0} - {k}, key=abs):
        if -3 <= other <= 3:
            yield dim, str(other), f"{name} runs along {word} {other} where {word} {k} belongs", "dim"


def _binop(node: ast.BinOp) -> Iterator[Edit]:
    op = type(node.op)
    a, b = node.left, node.right
    shown_a, shown_b = _short(a), _short(b)
    if op is ast.Add:
        yield node, _text(a), f"the term {shown_b or 'added last'} is missing{_of(node)}", "term"
        yield node, _text(b), f"the term {shown_a or 'added first'} is missing{_of(node)}", "term"
    elif op is ast.Sub:
        yield node, _text(a), f"{shown_b or 'a term'} is not subtracted{_of(node)}", "term"
        if shown_a and shown_b:
            yield node, f"({_text(b)} - {_text(a)})", f"the difference is the wrong way round ({shown_b} - {shown_a})", "order"
    elif op is ast.Mult:
        yield node, _text(a), f"the factor {shown_b or 'on the right'} is missing{_of(node)}", "factor"
        yield node, _text(b), f"the factor {shown_a or 'on the left'} is missing{_of(node)}", "factor"
    elif op is ast.Div:
        yield node, _text(a), f"the division by {shown_b or 'a term'} is missing", "factor"
        yield node, f"({_text(a)} * {_text(b)})", f"{shown_a or 'a value'} is multiplied by {shown_b or 'a term'} where it should be divided", "factor"
    if op in OPS:
        yield from _order(node)


def _of(node: ast.BinOp) -> str:
    shown = _short(node)
    return f" ({shown} is computed without it)" if shown and len(shown) <= 20 else ""


def _order(node: ast.BinOp) -> Iterator[Edit]:
    """A function applied to one operand that belongs around the whole operation, or the reverse."""
    word = OPS[type(node.op)]
    for side in ("left", "right"):
        inner = getattr(node, side)
        if isinstance(inner, ast.Call) and _called(inner) in APPLIED and not _is_method(inner) and len(inner.args) == 1:
            name = _called(inner)
            moved = copy.deepcopy(node)
            setattr(moved, side, inner.args[0])
            wrapped = copy.deepcopy(inner)
            wrapped.args = [moved]
            shown = _short(inner.args[0])
            alone = f" where it belongs to {shown} alone" if shown else ""
            yield node, ast.unparse(wrapped), f"{name} is applied to the whole {word}{alone}", "order"


def _subscript(node: ast.Subscript) -> Iterator[Edit]:
    shown = _short(node.value) or "a value"
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    for part in parts:
        if isinstance(part, ast.Slice):
            if part.lower is None and part.upper is not None and part.step is None:  # x[:n] -> x[1:n]
                yield part, f"1:{ast.unparse(part.upper)}", f"a slice of {shown} starts one position late (leaves out the first)", "off-by-one"
            if part.upper is None and part.lower is not None and part.step is None:  # x[n:] -> x[n:-1]
                yield part, f"{ast.unparse(part.lower)}:-1", f"a slice of {shown} stops one position early (leaves out the last)", "off-by-one"
            if part.step is None and (_int(part.lower), _int(part.upper)) in ((None, -1), (1, None)) \
                    and (part.lower is None) != (part.upper is None):  # x[:-1] <-> x[1:]: the same length, one position over
                later = part.lower is None
                yield part, "1:" if later else ":-1", (f"a slice of {shown} is shifted one position "
                                                        f"{'later' if later else 'earlier'} (it takes positions one "
                                                        f"{'after' if later else 'before'} those that belong)"), "off-by-one"
            for which, bound in (("starts", part.lower), ("stops", part.upper)):
                if bound is not None:
                    for k in (1, -1):
                        yield bound, _plus(bound, k), f"a slice of {shown} {which} one position {'late' if k > 0 else 'early'}", \
                            "off-by-one"
        elif _int(part) is not None or isinstance(part, ast.Name):
            for k in (1, -1):
                yield part, _plus(part, k), f"an index into {shown} is one off ({_plus(part, k)} where " \
                    f"{ast.unparse(part)} belongs)", "off-by-one"


def _unpacked(target: ast.Tuple) -> Iterator[Edit]:
    """Two names of an unpacking swapped: the gates taken from a chunk in the wrong order."""
    names = target.elts
    if not all(isinstance(n, ast.Name) for n in names) or len(names) < 2:
        return
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            swapped = [n.id for n in names]
            swapped[i], swapped[j] = swapped[j], swapped[i]
            yield target, ", ".join(swapped), f"{names[i].id} and {names[j].id} are unpacked in each other's place", "order"


def _loop(fn: ast.FunctionDef, loop: ast.For | ast.While) -> Iterator[Edit]:
    """State not carried from one step to the next, or started from another value."""
    before = _assigned_before(fn, loop)
    carried = {t.id for s in loop.body for t in _targets(s)}
    for statement in loop.body:
        if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
            v = statement.target.id
            yield statement, f"{v} = {ast.unparse(statement.value)}", \
                f"{v} keeps only the last step's value instead of accumulating over the loop", "state"
    for v in sorted(carried & set(before)):
        start = before[v]
        shown = _short(start)
        for node in _reads_before_write(loop.body, v):
            yield node, _text(start), (f"every step of the loop starts from {shown or 'the initial value'} instead of the {v} "
                                       "carried over from the step before"), "state"
        if isinstance(start, ast.Name):
            yield start, f"torch.zeros_like({start.id})", f"{start.id} is ignored: {v} starts from zeros", "initial"
        elif (value := _number(start)) is not None:
            for other in ("0", "1") if value not in (0, 1) else ("1",) if value == 0 else ("0",):
                yield start, other, f"{v} starts at {other} instead of {ast.unparse(start)}", "initial"


def _targets(statement: ast.stmt) -> list[ast.Name]:
    if isinstance(statement, ast.Assign):
        return [n for t in statement.targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return []


def _assigned_before(fn: ast.FunctionDef, loop: ast.stmt) -> dict[str, ast.AST]:
    """The values names last get before `loop`, in the block that holds it: `h = h0` and `h, c = h0, c0` alike."""
    for block in (n for n in ast.walk(fn) if hasattr(n, "body") and isinstance(getattr(n, "body"), list)):
        if loop in block.body:
            values = {}
            for statement in block.body[: block.body.index(loop)]:
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                    target, value = statement.targets[0], statement.value
                    if isinstance(target, ast.Name):
                        values[target.id] = value
                    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
                        values.update({t.id: v for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name)})
            return values
    return {}


def _reads_before_write(body: list[ast.stmt], v: str) -> list[ast.Name]:
    """The reads of `v` in a loop body that see the value of the step before: those before its first assignment there
    (the assigning statement's own right-hand side included)."""
    reads = []
    for statement in body:
        value = statement.value if isinstance(statement, ast.Assign) else statement
        reads += [n for n in ast.walk(value) if isinstance(n, ast.Name) and n.id == v and isinstance(n.ctx, ast.Load)]
        if v in {t.id for t in _targets(statement)}:
            break
    return reads
