"""Hypothesis strategies for random models written in the spec's spellings (tests/test_fuzz.py).

A model is a small *program*: a list of steps, each consuming earlier values (the forward()
arguments first) and producing one value. `build` turns a program into an nn.Module whose
forward() interprets the steps from a static Python list of closures, so FX traces it into a
graph of exactly the chosen spellings. Every step carries all the spellings of its meaning
(modules, functions, methods, indexing, containers) and, per spelling, the reason codes the
support boundary gives it: none for an accepted spelling, e.g. {"inplace"} for `x.relu_()`.
That is the oracle for the first error `convert` must raise, and the pool `respell` draws
from to check that spellings of one canonicalization group give identical IR.

Shapes and dtypes are learnt by running each step eagerly on a small example while the
program is drawn; magnitudes are bounded from the constants so that no accepted model
overflows on `check_exactness`'s inputs (overflow is outside the exactness contract).
"""

from __future__ import annotations

import math
import operator
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch import nn

from tests.conftest import BufferProxyTracer

EXAMPLE_BATCH = 3
"""Batch size of the eager examples that tell a drawn step's shape and dtype."""

INPUT_MAG = 1e5
"""Bound on |input| over check_exactness's generated inputs (randn at scales up to 1e4)."""

MAG_LIMIT = 1e30
"""No accepted value may exceed this estimate: float32 overflows at 3.4e38."""

DTYPES = (torch.float32, torch.float64)

CURRENT_STEP: list[Any] = [None]
"""The root program's step being run; `node_steps` reads it while tracing (not model state)."""


# --- programs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spelling:
    """One way to write a step. `text` is source-like ({0}, {1}: operands; {m}: attribute)."""

    text: str
    call: Callable[..., Any]  # call(model, attribute name, *operands) -> value
    attrs: Callable[[], dict[str, Any]] = dict  # fresh modules/tensors by name suffix
    expect: frozenset[str] = frozenset()  # reason codes; empty: accepted
    module: bool = False  # a call of the module at suffix "": usable inside nn.Sequential


@dataclass(frozen=True)
class Step:
    """One value of the program: a spelling applied to earlier values, or a nested block."""

    family: str
    args: tuple[int, ...]
    spellings: tuple[Spelling, ...] = ()
    chosen: int = 0
    body: tuple[Step, ...] = ()  # a block: a sub-program on args[0]
    container: str = ""  # "block" (user module), "sequential" or "inline"
    residual: str = ""  # "", "x + f(x)", "torch.add(x, f(x))" or "x.add(f(x))"
    breaks_trace: bool = False
    in_shapes: tuple[tuple[int, ...], ...] = ()  # per-sample shapes of the operands

    @property
    def spelling(self) -> Spelling:
        return self.spellings[self.chosen]

    @property
    def expect(self) -> frozenset[str]:
        """The codes the first problem of this step may have (empty: the step is accepted)."""
        if self.body:
            return next((s.expect for s in self.body if s.expect), frozenset())
        return self.spelling.expect

    def describe(self, out: str, names: list[str], indent: str = "") -> list[str]:
        ops = [names[a] for a in self.args]
        if not self.body:
            text = self.spelling.text.format(*ops, m=f"self.{out}")
            note = f"  # rejected: {sorted(self.expect)}" if self.expect else ""
            return [f"{indent}{out} = {text}{note}"]
        lines = [f"{indent}{out} = {self.container}({ops[0]}) {self.residual}:"]
        inner = [ops[0]]
        for j, step in enumerate(self.body):
            lines += step.describe(f"{out}_{j}", inner, indent + "    ")
            inner.append(f"{out}_{j}")
        return lines


OUTPUT_FORMS = {"single": None, "tuple": None, "list": None, "dict": "output-structure",
                "nested": "output-structure", "with-constant": "output-structure",
                "with-buffer": "output-structure"}


@dataclass(frozen=True)
class Program:
    """A random model: per-sample input shapes, steps, and what forward() returns."""

    dtype: torch.dtype
    inputs: tuple[tuple[int, ...], ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    output_form: str = "tuple"
    extra_shape: bool = False  # convert() gets one shape too many: input-count
    train_flags: int = 0  # bits: put training-agnostic leaf modules in training mode
    frozen: int = 0  # bits: parameters with requires_grad=False
    hooks: bool = False

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return self.inputs + ((1,),) * self.extra_shape

    @property
    def accepted(self) -> bool:
        return self.expected() is None

    def expected(self) -> tuple[str, frozenset[str]] | None:
        """Where the first problem is and its possible codes: ("", codes) for tracing,
        ("step <i>", codes), ("output", codes), or None when the model must convert."""
        if any(_breaks_trace(s) for s in self.steps):
            return "", frozenset({"trace-failed"})
        if self.extra_shape:
            return "", frozenset({"input-count"})
        for i, step in enumerate(self.steps):
            if step.expect:
                return f"step {i}", step.expect
        if OUTPUT_FORMS[self.output_form]:
            return "output", frozenset({OUTPUT_FORMS[self.output_form]})
        return None

    def clean(self) -> list[bool]:
        """Per step: every operand is an input or the value of a clean accepted step, so
        nothing upstream can hide or change the step's own verdict."""
        n, ok = len(self.inputs), []
        for step in self.steps:
            ok.append(all(a < n or (ok[a - n] and not self.steps[a - n].expect)
                          for a in step.args))
        return ok

    def __repr__(self) -> str:
        names = [f"x{i}" for i in range(len(self.inputs))]
        lines = [f"Program({str(self.dtype)[6:]}, inputs {list(self.inputs)}, "
                 f"convert shapes {list(self.shapes)}):"]
        for i, step in enumerate(self.steps):
            lines += step.describe(f"s{i}", names, "    ")
            names.append(f"s{i}")
        outs = ", ".join(names[o] for o in self.outputs)
        lines.append(f"    return {self.output_form}({outs})"
                     f"  # train_flags={self.train_flags:#x} frozen={self.frozen:#x} "
                     f"hooks={self.hooks}")
        return "\n".join(lines)


def _breaks_trace(step: Step) -> bool:
    return step.breaks_trace or any(_breaks_trace(s) for s in step.body)


# --- models --------------------------------------------------------------------------------


class ProgramModel(nn.Module):
    """Interprets a program's steps; the forward() of each arity is in `_ARITY`."""

    def __init__(self, steps: tuple[Step, ...], outputs: tuple[int, ...] = (),
                 output_form: str = "single", root: bool = False):
        super().__init__()
        self.steps = steps  # a static list: FX traces the loop over it
        self.outputs = outputs
        self.output_form = output_form
        self.root = root
        for i, step in enumerate(steps):
            _register(self, f"s{i}", step)
        if output_form == "with-buffer":
            self.register_buffer("out_buf", torch.zeros(1))

    def run(self, *inputs):
        values = list(inputs)
        for i, step in enumerate(self.steps):
            if self.root:
                CURRENT_STEP[0] = i
            values.append(_call(self, f"s{i}", step, values))
        if self.root:
            CURRENT_STEP[0] = "output"
        if not self.root:
            return values[-1]
        outs = [values[o] for o in self.outputs]
        form = self.output_form
        if form == "single":
            return outs[0]
        if form == "list":
            return outs
        if form == "dict":
            return {f"y{i}": y for i, y in enumerate(outs)}
        if form == "nested":
            return (tuple(outs[:1]), *outs[1:])
        if form == "with-constant":
            return (*outs, 1.0)
        if form == "with-buffer":
            return (*outs, self.out_buf)
        return tuple(outs)


class Model1(ProgramModel):
    def forward(self, x0):
        return self.run(x0)


class Model2(ProgramModel):
    def forward(self, x0, x1):
        return self.run(x0, x1)


class Model3(ProgramModel):
    def forward(self, x0, x1, x2):
        return self.run(x0, x1, x2)


_ARITY = {1: Model1, 2: Model2, 3: Model3}


CHAIN_CONTAINERS = {
    "sequential": lambda mods: nn.Sequential(*mods),
    "modulelist": nn.ModuleList,
    "moduledict": lambda mods: nn.ModuleDict({f"layer{i}": mod for i, mod in enumerate(mods)}),
}
"""Containers of a chain of module calls (the body's steps are module spellings)."""


def _register(m: nn.Module, name: str, step: Step) -> None:
    if step.container == "block":
        m.add_module(name, Model1(step.body))
    elif step.container in CHAIN_CONTAINERS:
        mods = [s.spelling.attrs()[""] for s in step.body]
        m.add_module(name, CHAIN_CONTAINERS[step.container](mods))
    elif step.container == "inline":
        for j, inner in enumerate(step.body):
            _register(m, f"{name}_{j}", inner)
    else:
        for suffix, value in step.spelling.attrs().items():
            if isinstance(value, nn.Module):
                m.add_module(name + suffix, value)
            elif isinstance(value, nn.Parameter):
                m.register_parameter(name + suffix, value)
            elif isinstance(value, torch.Tensor) and not suffix.endswith("_plain"):
                m.register_buffer(name + suffix, value)
            else:  # a plain attribute: FX makes a tensor constant of it
                object.__setattr__(m, name + suffix, value)


def _call(m: nn.Module, name: str, step: Step, values: list):
    operands = [values[a] for a in step.args]
    if not step.body:
        return step.spelling.call(m, name, *operands)
    x = y = operands[0]
    if step.container == "inline":
        local = [x]
        for j, inner in enumerate(step.body):
            local.append(_call(m, f"{name}_{j}", inner, local))
        y = local[-1]
    elif step.container == "modulelist":
        for layer in getattr(m, name):
            y = layer(y)
    elif step.container == "moduledict":
        for layer in getattr(m, name).values():
            y = layer(y)
    else:
        y = getattr(m, name)(x)
    return RESIDUALS[step.residual](x, y)


RESIDUALS: dict[str, Callable] = {
    "": lambda x, y: y,
    "x + f(x)": operator.add,
    "torch.add(x, f(x))": torch.add,
    "x.add(f(x))": lambda x, y: x.add(y),
}


def build(program: Program) -> nn.Module:
    """A fresh model for `program`, in eval mode except where the program says otherwise."""
    model = _ARITY[len(program.inputs)](program.steps, program.outputs, program.output_form,
                                        root=True)
    model.eval()
    _apply_flags(model, program)
    for i, (_, p) in enumerate(sorted(model.named_parameters())):
        if p.is_floating_point():
            p.requires_grad_(not program.frozen >> (i % 30) & 1)
    if program.hooks:
        model.register_forward_hook(lambda module, args, out: None)
        model.register_forward_pre_hook(lambda module, args: None)
        for _, sub in sorted(model.named_modules())[1:2]:
            sub.register_forward_hook(lambda module, args, out: None)
    return model


_TRAINING_AGNOSTIC = (nn.ReLU, nn.LeakyReLU, nn.Identity, nn.Linear, nn.Conv2d, nn.MaxPool2d,
                      nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Flatten)


def _apply_flags(model: nn.Module, program: Program) -> None:
    """Training flags a spelling asked for (`_train` marks), and random ones where they do
    not matter."""
    for i, (_, sub) in enumerate(sorted(model.named_modules())):
        if getattr(sub, "_train", False):
            sub.training = True
        elif isinstance(sub, _TRAINING_AGNOSTIC) and program.train_flags >> (i % 30) & 1:
            sub.training = True


class StepTracer(BufferProxyTracer):
    """FX tracing as NCET does it, recording which root step created each node."""

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta["step"] = CURRENT_STEP[0]
        return node


def node_steps(model: nn.Module) -> dict[str, Any] | None:
    """FX node name -> "step <i>", "output" or "input"; None when FX cannot trace."""
    CURRENT_STEP[0] = None
    try:
        graph = StepTracer().trace(model)
    except Exception:
        return None
    finally:
        CURRENT_STEP[0] = None
    where = {}
    for node in graph.nodes:
        s = node.meta.get("step")
        where[node.name] = "input" if s is None else "output" if s == "output" else f"step {s}"
    return where


# --- values and constants --------------------------------------------------------------------


@dataclass(frozen=True)
class Val:
    """What the generator knows of a value: per-sample shape, dtype, magnitude, an example."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    mag: float
    example: torch.Tensor = field(repr=False)

    @property
    def rank(self) -> int:
        return len(self.shape)


def subnormal(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).tiny / 1024


GOOD_SCALARS = (0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 0.1, 1 / 3, 3, -7, 2 ** 24 + 1, 2 ** 53, 1e-30,
                -1e-30, 1e30, -1e30, 1e5, 2.0 ** -126, 2.0 ** -149, 1e-40, 1e-310, 5e-324,
                2.2250738585072014e-308, 1e-300)
BAD_SCALARS = {math.nan: "constant-not-finite", math.inf: "constant-not-finite",
               -math.inf: "constant-not-finite", True: "affine-constant-type",
               2 ** 53 + 1: "affine-constant-type", -(2 ** 60): "affine-constant-type",
               1 + 2j: "affine-constant-type"}


def _fits(dtype: torch.dtype, value: float) -> bool:
    """The scalar does not overflow when PyTorch rounds it to `dtype`."""
    return abs(value) <= torch.finfo(dtype).max


def _magnitude(t: torch.Tensor) -> float:
    return float(t.detach().double().abs().max()) if t.numel() else 0.0


def _smallest(t: torch.Tensor) -> float:
    return float(t.detach().double().abs().min()) if t.numel() else math.inf


class _Skip(Exception):
    """No operand fits the drawn family: draw no step."""


class _Gen:
    """Draws steps for one (sub-)program; `vals` are the values so far."""

    def __init__(self, draw, dtype: torch.dtype, vals: list[Val], reject_percent: int,
                 depth: int = 0, module_only: bool = False):
        self.draw, self.dtype, self.vals = draw, dtype, vals
        self.reject_percent, self.depth, self.module_only = reject_percent, depth, module_only
        self.steps: list[Step] | None = None  # the root program's steps (for reuse)
        # Choices among families, spellings, operands and constants use a drawn seed:
        # Hypothesis favours the first entries of sampled_from heavily, which would starve
        # the later ones. Sizes, dims and the number of steps are drawn (and shrink).
        self.rng = random.Random(draw(st.integers(0, 2 ** 32 - 1)))

    # draws
    def pick(self, options):
        return self.rng.choice(list(options))

    def chance(self, percent: int) -> bool:
        return self.rng.random() * 100 < percent

    def usable(self, ok: Callable[[Val], bool] = lambda v: True) -> list[int]:
        return [i for i, v in enumerate(self.vals) if v is not None and ok(v)]

    def operand(self, ok: Callable[[Val], bool] = lambda v: True) -> int:
        """The index of a usable value with `ok`; skips the step when there is none."""
        candidates = self.usable(ok)
        if not candidates:
            raise _Skip
        return self.pick(candidates)

    def tensor(self, shape, dtype=None, scale: float = 1.0, specials=(), positive=False,
               integer=False) -> torch.Tensor:
        """A seeded random tensor, with up to two of `specials` planted in it."""
        g = torch.Generator().manual_seed(self.draw(st.integers(0, 2 ** 31 - 1)))
        t = torch.randn(shape, generator=g, dtype=torch.float64) * scale
        if positive:
            t = t.abs() + 0.1 * scale
        if integer:
            t = t.round()
        flat = t.view(-1)
        if flat.numel() and specials:
            for _ in range(self.draw(st.integers(0, 2))):
                flat[self.draw(st.integers(0, flat.numel() - 1))] = self.pick(specials)
        return t.to(dtype or self.dtype)

    # steps
    def step(self) -> Step | None:
        """A step of a random family (three tries to find one that fits the values)."""
        reject = self.chance(self.reject_percent)
        families = [f for f in FAMILIES
                    if (reject or not f.always_rejected) and (self.depth < 2 or not f.nested)
                    and (not self.module_only or f.module)]
        weights = [f.weight for f in families]
        for _ in range(3):
            try:
                step = self.rng.choices(families, weights)[0].draw(self, reject)
            except _Skip:
                continue
            if step is not None:
                return step
        return None

    def finish(self, family: str, args: tuple[int, ...], spellings: list[Spelling],
               reject: bool, mag: float = 0.0, breaks_trace: bool = False) -> Step | None:
        """Keep the accepted spellings that run eagerly with one result shape, choose one
        (a rejected one if `reject` and there is one), and record the output value."""
        if self.module_only:
            spellings = [s for s in spellings if s.module]
        operands = [self.vals[a].example for a in args]
        good, shape = [], None
        for s in spellings:
            if s.expect:
                continue
            out = _run(s, operands)
            if not isinstance(out, torch.Tensor) or out.dim() == 0 \
                    or out.shape[0] != EXAMPLE_BATCH:
                continue
            if shape is None:
                shape = (tuple(out.shape), out.dtype)
            if (tuple(out.shape), out.dtype) == shape:
                good.append(s)
        bad = [s for s in spellings if s.expect]
        pool = bad if reject and bad else good
        if not pool:
            return None
        chosen = self.rng.choice(pool)
        if not chosen.expect and not mag <= MAG_LIMIT:  # also NaN
            return None
        out = _run(chosen, operands)
        step = Step(family, args, tuple(good + bad), (good + bad).index(chosen),
                    breaks_trace=breaks_trace,
                    in_shapes=tuple(self.vals[a].shape for a in args))
        self.vals.append(_val(out, mag if not chosen.expect else INPUT_MAG))
        return step


def _run(spelling: Spelling, operands: list[torch.Tensor]):
    holder = nn.Module()
    _register(holder, "s", Step("", (), (spelling,)))
    holder.eval()
    for sub in holder.modules():
        if getattr(sub, "_train", False):
            sub.training = True
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return spelling.call(holder, "s", *[x.clone() for x in operands])
    except Exception:
        return None


def _val(out, mag: float) -> Val | None:
    if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] != EXAMPLE_BATCH \
            or not out.is_floating_point():
        return None
    return Val(tuple(out.shape[1:]), out.dtype, max(mag, 0.0), out)


# --- spelling helpers ----------------------------------------------------------------------

Codes = tuple[str, ...] | frozenset[str]


def fn(text: str, f: Callable, expect: Codes = ()) -> Spelling:
    """A function or method spelling: f(*operands)."""
    return Spelling(text, lambda m, name, *xs: f(*xs), expect=frozenset(expect))


def with_state(text: str, f: Callable, state: Callable[[], dict], expect: Codes = ()
               ) -> Spelling:
    """A spelling reading tensors of the model: f(get, *operands), get(suffix) -> tensor."""
    return Spelling(text, lambda m, name, *xs: f(lambda s: getattr(m, name + s), *xs),
                    attrs=state, expect=frozenset(expect))


def module(text: str, factory: Callable[[], nn.Module], expect: Codes = (),
           train: bool = False) -> Spelling:
    """A call_module spelling; `train` puts the module in training mode."""
    def make():
        with torch.random.fork_rng(devices=[]):
            mod = factory()
        mod._train = train  # read by build(): a Python attribute, not model state
        return {"": mod}
    return Spelling(text, lambda m, name, x: getattr(m, name)(x), attrs=make,
                    expect=frozenset(expect), module=True)


# --- families ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    name: str
    draw: Callable[[_Gen, bool], Step | None]
    always_rejected: bool = False
    module: bool = False  # has call_module spellings (for nn.Sequential bodies)
    nested: bool = False
    weight: int = 1  # how often it is drawn, relative to the others


FAMILIES: list[Family] = []


def family(weight=1, always_rejected=False, module=False, nested=False):
    def register(draw):
        FAMILIES.append(Family(draw.__name__, draw, always_rejected, module, nested, weight))
        return draw
    return register


@family(module=True)
def relu(g: _Gen, reject: bool):
    a = g.operand()
    spellings = [
        module("nn.ReLU()({0})", nn.ReLU), fn("F.relu({0})", F.relu),
        fn("torch.relu({0})", torch.relu), fn("{0}.relu()", lambda x: x.relu()),
        fn("F.relu({0}, inplace=False)", lambda x: F.relu(x, inplace=False)),
        module("nn.LeakyReLU(0.0)({0})", lambda: nn.LeakyReLU(0.0)),
        fn("F.leaky_relu({0}, -0.0)", lambda x: F.leaky_relu(x, -0.0)),
        module("nn.ReLU(inplace=True)({0})", lambda: nn.ReLU(inplace=True), ["inplace"]),
        fn("F.relu({0}, inplace=True)", lambda x: F.relu(x, inplace=True), ["inplace"]),
        fn("{0}.relu_()", lambda x: x.relu_(), ["inplace"]),
        fn("torch.relu_({0})", torch.relu_, ["inplace"]),
        fn("F.relu_({0})", F.relu_, ["inplace"]),
    ]
    return g.finish("relu", (a,), spellings, reject, g.vals[a].mag)


@family(6)
def affine(g: _Gen, reject: bool):
    """ElementwiseAffine: one graph tensor and a scalar, buffer, parameter or plain tensor."""
    a = g.operand()
    v = g.vals[a]
    kind = g.pick(AFFINE_KINDS)
    source = g.pick(["scalar", "scalar", "buffer", "parameter", "plain", "scalar-buffer"])
    alpha, alpha_codes = None, []
    if kind in ("add", "sub", "rsub") and g.chance(30) and (source, kind) != ("scalar", "rsub"):
        bad = reject and g.chance(30)
        huge = [1e300] if source == "scalar" and not _fits(v.dtype, 1e300) else []
        alpha = g.pick([math.nan, math.inf, -math.inf, *huge] if bad
                       else [2.0, -1.0, 0.5, 0.0, -0.0, 3, 1e-30, 1e-40])
        alpha_codes = ["alpha"] if bad else []
        if source != "scalar" and g.chance(50):
            kind = {"add": "radd", "sub": "rsub", "rsub": "rsub"}[kind]  # c + alpha * x
    if source == "scalar":
        value, codes = _affine_scalar(g, kind, v.mag, v.dtype, reject)
        codes = codes + alpha_codes
        if codes:
            mag = 0.0
        else:
            c = abs(float(value))
            mag = v.mag / c if kind == "div" else v.mag * c if kind == "mul" \
                else v.mag + c * abs(1 if alpha is None else alpha)
        return g.finish("affine", (a,), _scalar_spellings(kind, value, codes, alpha), reject,
                        mag)
    return _tensor_affine(g, a, kind, source, reject, alpha, alpha_codes)


@family(module=True)
def leaky_relu(g: _Gen, reject: bool):
    a = g.operand()
    bad = reject and g.chance(50)
    slope = g.pick([-0.1, 1.5, math.nan, math.inf, -math.inf, -1e-300] if bad
                   else [0.01, 0.2, 0.5, 1e-45, 1 - 2 ** -24, 2 ** -30, 1 / 3])
    codes = ["leaky-relu-slope"] if bad else []
    spellings = [
        module(f"nn.LeakyReLU({slope})({{0}})", lambda: nn.LeakyReLU(slope), codes),
        fn(f"F.leaky_relu({{0}}, {slope})", lambda x: F.leaky_relu(x, slope), codes),
        fn(f"F.leaky_relu({{0}}, negative_slope={slope})",
           lambda x: F.leaky_relu(x, negative_slope=slope), codes),
        module(f"nn.LeakyReLU({slope}, inplace=True)({{0}})",
               lambda: nn.LeakyReLU(slope, inplace=True), ["inplace", *codes]),
        fn(f"F.leaky_relu({{0}}, {slope}, True)", lambda x: F.leaky_relu(x, slope, True),
           ["inplace", *codes]),
        fn(f"F.leaky_relu_({{0}}, {slope})", lambda x: F.leaky_relu_(x, slope), ["inplace"]),
    ]
    mag = g.vals[a].mag * max(1.0, abs(slope)) if not bad else 0.0
    return g.finish("leaky_relu", (a,), spellings, reject, mag)


@family(module=True)
def identity(g: _Gen, reject: bool):
    a = g.operand()
    rank = g.vals[a].rank + 1  # batched
    p = g.pick([0.0, 0.1, 0.5, 0.9])
    spellings = [
        module("nn.Identity()({0})", nn.Identity),
        module(f"nn.Dropout({p}).eval()({{0}})", lambda: nn.Dropout(p)),
        fn(f"F.dropout({{0}}, {p}, training=False)", lambda x: F.dropout(x, p, training=False)),
        fn("F.dropout({0}, training=False)", lambda x: F.dropout(x, training=False)),
        Spelling(f"F.dropout({{0}}, {p}, self.training)",
                 lambda m, name, x: F.dropout(x, p, m.training)),
        module("nn.LeakyReLU(1.0)({0})", lambda: nn.LeakyReLU(1.0)),
        fn("F.leaky_relu({0}, 1)", lambda x: F.leaky_relu(x, 1)),
        module(f"nn.Dropout({p})({{0}})  # training", lambda: nn.Dropout(p),
               ["dropout-training"], train=True),
        fn(f"F.dropout({{0}}, {p})", lambda x: F.dropout(x, p), ["dropout-training"]),
        fn("F.dropout({0}, training=True)", lambda x: F.dropout(x, training=True),
           ["dropout-training"]),
        module("nn.Dropout(inplace=True).eval()({0})", lambda: nn.Dropout(inplace=True),
               ["inplace"]),
        fn("F.dropout({0}, 0.5, False, True)", lambda x: F.dropout(x, 0.5, False, True),
           ["inplace"]),
    ]
    if rank in (2, 3):
        spellings += [module("nn.Dropout1d().eval()({0})", nn.Dropout1d),
                      fn("F.dropout1d({0}, training=False)",
                         lambda x: F.dropout1d(x, training=False))]
    if rank == 4:
        spellings += [module("nn.Dropout2d(0.3).eval()({0})", lambda: nn.Dropout2d(0.3)),
                      fn("F.dropout2d({0}, 0.3, False)", lambda x: F.dropout2d(x, 0.3, False)),
                      module("nn.Dropout3d().eval()({0})", nn.Dropout3d),
                      module("nn.Dropout2d()({0})  # training", nn.Dropout2d,
                             ["dropout-training"], train=True)]
    return g.finish("identity", (a,), spellings, reject, g.vals[a].mag)


UNLISTED = [
    ("torch.sigmoid({0})", torch.sigmoid, "unsupported-function"),
    ("torch.tanh({0})", torch.tanh, "unsupported-function"),
    ("torch.abs({0})", torch.abs, "unsupported-function"),
    ("-{0}", operator.neg, "unsupported-function"),
    ("abs({0})", abs, "unsupported-function"),
    ("torch.clamp({0}, min=0.0)", lambda x: torch.clamp(x, min=0.0), "unsupported-function"),
    ("F.gelu({0})", F.gelu, "unsupported-function"),
    ("F.softplus({0})", F.softplus, "unsupported-function"),
    ("F.hardtanh({0})", F.hardtanh, "unsupported-function"),
    ("{0} ** 2", lambda x: x ** 2, "unsupported-function"),
    ("torch.square({0})", torch.square, "unsupported-function"),
    ("{0}.abs()", lambda x: x.abs(), "unsupported-method"),
    ("{0}.clamp(min=0.0)", lambda x: x.clamp(min=0.0), "unsupported-method"),
    ("{0}.sigmoid()", lambda x: x.sigmoid(), "unsupported-method"),
    ("{0}.contiguous()", lambda x: x.contiguous(), "unsupported-method"),
    ("{0}.clone()", lambda x: x.clone(), "unsupported-method"),
    ("{0}.detach()", lambda x: x.detach(), "unsupported-method"),
    ("{0}.float()", lambda x: x.float(), "unsupported-method"),
    ("{0}.double()", lambda x: x.double(), "unsupported-method"),
    ("{0}.neg()", lambda x: x.neg(), "unsupported-method"),
    ("{0}.tanh()", lambda x: x.tanh(), "unsupported-method"),
    ("{0}.abs_()", lambda x: x.abs_(), "inplace"),
    ("{0}.clamp_(min=0.0)", lambda x: x.clamp_(min=0.0), "inplace"),
]
UNLISTED_MODULES = [("nn.Sigmoid()", nn.Sigmoid), ("nn.Tanh()", nn.Tanh), ("nn.ReLU6()", nn.ReLU6),
                    ("nn.Hardtanh()", nn.Hardtanh), ("nn.GELU()", nn.GELU),
                    ("nn.ELU()", nn.ELU), ("nn.PReLU()", nn.PReLU), ("nn.Softplus()", nn.Softplus)]


@family(2, always_rejected=True, module=True)
def unlisted(g: _Gen, reject: bool):
    """Operations outside the spelling tables, shape-preserving."""
    a = g.operand()
    if g.chance(40):
        text, factory = g.pick(UNLISTED_MODULES)
        spelling = module(f"{text}({{0}})", factory, ["unsupported-module"])
    else:
        text, f, code = g.pick(UNLISTED)
        spelling = fn(text, f, [code])
    return g.finish("unlisted", (a,), [spelling], True)


@family(always_rejected=True)
def batch_norm_function(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.rank >= 1 and v.dtype == g.dtype and 0 not in v.shape)
    channels = g.vals[a].shape[0]

    def state():
        return {"_mean": torch.zeros(channels, dtype=g.dtype),
                "_var": torch.ones(channels, dtype=g.dtype)}
    spellings = [
        with_state("F.batch_norm({0}, {m}_mean, {m}_var)",
                   lambda get, x: F.batch_norm(x, get("_mean"), get("_var")), state,
                   ["batch-norm-function"]),
        with_state("torch.batch_norm({0}, None, None, {m}_mean, {m}_var, False, 0.1, 1e-5, "
                   "False)", lambda get, x: torch.batch_norm(
                       x, None, None, get("_mean"), get("_var"), False, 0.1, 1e-5, False),
                   state, ["batch-norm-function"]),
    ]
    return g.finish("batch_norm_function", (a,), spellings, True)


@family(always_rejected=True)
def trace_breaker(g: _Gen, reject: bool):
    """Python control flow on a traced value or shape: FX cannot trace it."""
    a = g.operand()
    spellings = [
        fn("{0} if {0}.sum() > 0 else -{0}", lambda x: x if x.sum() > 0 else -x,
           ["trace-failed"]),
        fn("{0} * 2.0 if {0}.shape[-1] > 2 else {0}", lambda x: x * 2.0 if x.shape[-1] > 2
           else x, ["trace-failed"]),
    ]
    return g.finish("trace_breaker", (a,), spellings, True, breaks_trace=True)


def _binary_operands(g: _Gen, same_dtype: bool = False) -> tuple[int, int] | None:
    a = g.operand()
    va = g.vals[a]
    return a, g.operand(lambda v: v.shape == va.shape and (not same_dtype or v.dtype == va.dtype))


@family(3)
def add_sub(g: _Gen, reject: bool):
    """Add and Sub of two graph tensors (residual branches when the operands share a root)."""
    a, b = _binary_operands(g)
    sub = g.chance(40)
    dtype = torch.promote_types(g.vals[a].dtype, g.vals[b].dtype)
    bad_alpha = reject and g.chance(30)
    alpha = g.pick([math.nan, math.inf, -math.inf, *[1e300] * (not _fits(dtype, 1e300))]
                   if bad_alpha else [None, None, 1, 2.0, -1.0, 0.5, 0.0, -0.0, 1e-30, 3, 1e-40])
    codes = ["alpha"] if bad_alpha else []
    op, name = (operator.sub, "sub") if sub else (operator.add, "add")
    fns = [torch.sub, torch.subtract] if sub else [torch.add]
    methods = ["sub", "subtract"] if sub else ["add"]
    spellings = []
    if alpha is None:
        spellings.append(fn(f"{{0}} {'-' if sub else '+'} {{1}}", op))
        for f in fns:
            spellings += [fn(f"torch.{f.__name__}({{0}}, {{1}})", f),
                          fn(f"torch.{f.__name__}({{0}}, other={{1}})",
                             lambda x, y, f=f: f(x, other=y)),
                          fn(f"torch.{f.__name__}({{0}}, {{1}}, alpha=1)",
                             lambda x, y, f=f: f(x, y, alpha=1))]
        spellings += [fn(f"{{0}}.{meth}({{1}})", lambda x, y, meth=meth: getattr(x, meth)(y))
                      for meth in methods]
    else:
        for f in fns:
            spellings.append(fn(f"torch.{f.__name__}({{0}}, {{1}}, alpha={alpha})",
                                lambda x, y, f=f: f(x, y, alpha=alpha), codes))
        spellings += [fn(f"{{0}}.{meth}({{1}}, alpha={alpha})",
                         lambda x, y, meth=meth: getattr(x, meth)(y, alpha=alpha), codes)
                      for meth in methods]
    spellings += [
        fn(f"{{0}}.{name}_({{1}})", lambda x, y: getattr(x, name + "_")(y), ["inplace"]),
        with_state(f"torch.{name}({{0}}, {{1}}, out={{m}}_out)",
                   lambda get, x, y: getattr(torch, name)(x, y, out=get("_out")),
                   lambda: {"_out": torch.zeros(1, dtype=g.dtype)}, ["out-argument"]),
    ]
    mag = g.vals[a].mag + abs(1 if alpha is None else alpha) * g.vals[b].mag \
        if not bad_alpha else 0.0
    return g.finish("add_sub", (a, b), spellings, reject, mag)


@family(always_rejected=True)
def tensor_tensor(g: _Gen, reject: bool):
    """Mul/Div of two graph tensors, and Add/Sub of tensors of different ranks."""
    a = g.operand()
    lower = g.usable(lambda v: v.rank < g.vals[a].rank)
    if lower and g.chance(40):
        b = g.pick(lower)
        spellings = [fn("{0} + {1}", operator.add, ["broadcast-batch-axis"]),
                     fn("torch.sub({0}, {1})", torch.sub, ["broadcast-batch-axis"])]
        if g.vals[b].rank >= 1:
            spellings.append(fn("torch.cat(({0}, {1}), 1)", lambda x, y: torch.cat((x, y), 1),
                                ["rank"]))
        return g.finish("tensor_tensor", (a, b), spellings, True)
    a, b = _binary_operands(g)
    codes = ["affine-tensor-tensor"]
    spellings = [fn("{0} * {1}", operator.mul, codes), fn("torch.mul({0}, {1})", torch.mul, codes),
                 fn("{0}.multiply({1})", lambda x, y: x.multiply(y), codes),
                 fn("{0} / {1}", operator.truediv, codes),
                 fn("torch.div({0}, {1})", torch.div, codes),
                 fn("{0}.true_divide({1})", lambda x, y: x.true_divide(y), codes)]
    return g.finish("tensor_tensor", (a, b), spellings, True)


@family(2)
def concat(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.rank >= 1)
    va = g.vals[a]
    others = g.usable(lambda v: v.shape == va.shape)
    args = (a, *[g.pick(others) for _ in range(g.draw(st.integers(0, 2)))])
    dim = g.draw(st.integers(1, va.rank))
    neg = dim - va.rank - 1
    k = len(args)
    seq = "(" + ", ".join(f"{{{i}}}" for i in range(k)) + ("," if k == 1 else "") + ")"
    spellings = [
        fn(f"torch.cat({seq}, {dim})", lambda *xs: torch.cat(xs, dim)),
        fn(f"torch.cat({seq}, dim={neg})", lambda *xs: torch.cat(list(xs), dim=neg)),
        fn(f"torch.concat({seq}, {dim})", lambda *xs: torch.concat(xs, dim)),
        fn(f"torch.concatenate({seq}, axis={dim})",
           lambda *xs: torch.concatenate(xs, axis=dim)),
        fn(f"torch.cat({seq}, 0)", lambda *xs: torch.cat(xs, 0), ["batch-axis"]),
        fn(f"torch.cat({seq}, {-va.rank - 1})", lambda *xs: torch.cat(xs, -va.rank - 1),
           ["batch-axis"]),
        with_state(f"torch.cat(({{0}}, {{m}}_c), {dim})",
                   lambda get, x, *rest: torch.cat((x, get("_c")), dim),
                   lambda: {"_c": torch.zeros(EXAMPLE_BATCH, *va.shape, dtype=g.dtype)},
                   ["concat-constant"]),
    ]
    return g.finish("concat", args, spellings, reject, max(g.vals[i].mag for i in args))


AFFINE_KINDS = ("add", "sub", "rsub", "mul", "div")


def _affine_scalar(g: _Gen, kind: str, mag: float, dtype: torch.dtype, reject: bool):
    """A scalar constant and its reason codes (none when it is accepted)."""
    if reject and g.chance(50):
        if kind == "div" and g.chance(40):
            return g.pick([0.0, -0.0, subnormal(dtype), -subnormal(dtype)]), \
                ["affine-zero-divisor", "constant-subnormal"]
        value = g.pick([*BAD_SCALARS, 1e300, -1e300, 1e39])
        if value in BAD_SCALARS:
            return value, [BAD_SCALARS[value]]
        if not _fits(dtype, value):  # PyTorch rounds it to inf in the op's dtype
            return value, ["constant-not-finite"]
    fitting = []
    for c in GOOD_SCALARS:
        if kind == "div":
            if c == 0 or abs(c) < torch.finfo(dtype).tiny:
                continue
            out = mag / abs(c)
        elif kind == "mul":
            out = mag * abs(c)
        else:
            out = mag + abs(c)
        if out <= MAG_LIMIT and _fits(dtype, c):
            fitting.append(c)
    return g.pick(fitting), []


def _scalar_spellings(kind: str, c, codes, alpha=None) -> list[Spelling]:
    e = list(codes)
    if alpha is not None:  # x + alpha * c, x - alpha * c
        fns = [torch.add] if kind == "add" else [torch.sub, torch.subtract]
        methods = ["add"] if kind == "add" else ["sub", "subtract"]
        return [fn(f"torch.{f.__name__}({{0}}, {c!r}, alpha={alpha!r})",
                   lambda x, f=f: f(x, c, alpha=alpha), e) for f in fns] + [
                fn(f"{{0}}.{meth}({c!r}, alpha={alpha!r})",
                   lambda x, meth=meth: getattr(x, meth)(c, alpha=alpha), e) for meth in methods]
    table = {
        "add": [("{0} + %r", lambda x: x + c), ("%r + {0}", lambda x: c + x),
                ("torch.add({0}, %r)", lambda x: torch.add(x, c)),
                ("{0}.add(%r)", lambda x: x.add(c))],
        "sub": [("{0} - %r", lambda x: x - c), ("torch.sub({0}, %r)", lambda x: torch.sub(x, c)),
                ("torch.subtract({0}, %r)", lambda x: torch.subtract(x, c)),
                ("{0}.sub(%r)", lambda x: x.sub(c)),
                ("{0}.subtract(%r)", lambda x: x.subtract(c))],
        "rsub": [("%r - {0}", lambda x: c - x)],
        "mul": [("{0} * %r", lambda x: x * c), ("%r * {0}", lambda x: c * x),
                ("torch.mul({0}, %r)", lambda x: torch.mul(x, c)),
                ("torch.multiply({0}, %r)", lambda x: torch.multiply(x, c)),
                ("{0}.mul(%r)", lambda x: x.mul(c)),
                ("{0}.multiply(%r)", lambda x: x.multiply(c))],
        "div": [("{0} / %r", lambda x: x / c), ("torch.div({0}, %r)", lambda x: torch.div(x, c)),
                ("torch.divide({0}, %r)", lambda x: torch.divide(x, c)),
                ("torch.true_divide({0}, %r)", lambda x: torch.true_divide(x, c)),
                ("{0}.div(%r)", lambda x: x.div(c)), ("{0}.divide(%r)", lambda x: x.divide(c)),
                ("{0}.true_divide(%r)", lambda x: x.true_divide(c))],
    }[kind]
    spellings = [fn(text.replace("%r", repr(c)), f, e) for text, f in table]
    if kind == "div":
        spellings += [
            fn(f"{c!r} / {{0}}", lambda x: c / x, ["affine-constant-over-tensor", *e]),
            fn(f"torch.div({{0}}, {c!r}, rounding_mode='floor')",
               lambda x: torch.div(x, c, rounding_mode="floor"), ["affine-rounding-mode", *e]),
            fn(f"{{0}}.div_({c!r})", lambda x: x.div_(c), ["inplace"])]
    if kind == "mul":
        spellings.append(fn(f"{{0}}.mul_({c!r})", lambda x: x.mul_(c), ["inplace"]))
    return spellings


def _constant_shape(g: _Gen, shape: tuple[int, ...], bad: bool) -> tuple[int, ...]:
    """A constant shape that broadcasts to the per-sample shape, or (bad) one that grows it."""
    if bad:
        return g.pick([(2, 1, *shape), (*shape[:-1], 4 if shape and shape[-1] != 4 else 5)])
    k = g.draw(st.integers(0, len(shape)))
    tail = tuple(d if g.chance(70) else 1 for d in shape[len(shape) - k:])
    return g.pick([tail, (1, *tail)])


def _affine_codes(t: torch.Tensor, kind: str, x: Val) -> list[str]:
    """Every reason code the boundary has for this constant (NCET reports one of them)."""
    codes = []
    if t.dtype == torch.bool:
        return ["affine-constant-type"]
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        codes.append("constant-not-finite")
    if not t.is_floating_point() and any(abs(v) > 2 ** 53 for v in t.reshape(-1).tolist()):
        codes.append("affine-constant-type")
    result = torch.result_type(x.example, t)
    if t.numel() and not _fits(result, _magnitude(t)):  # rounds to inf in the op's dtype
        codes.append("constant-not-finite")
    if kind == "div" and bool((t == 0).any()):
        codes.append("affine-zero-divisor")
    if kind == "div" and 0 < _smallest(t) < torch.finfo(result).tiny:
        codes.append("constant-subnormal")
    for batch in (2, 3):
        try:
            ok = torch.broadcast_shapes((batch, *x.shape), t.shape) == (batch, *x.shape)
        except RuntimeError:
            ok = False
        if not ok:
            codes.append("affine-broadcast")
            break
    return codes


AFFINE_TABLE = {
    "add": [("{0} + C", operator.add), ("C + {0}", lambda x, c: c + x),
            ("torch.add({0}, C)", torch.add), ("torch.add(C, {0})", lambda x, c: torch.add(c, x)),
            ("{0}.add(C)", lambda x, c: x.add(c)), ("C.add({0})", lambda x, c: c.add(x))],
    "sub": [("{0} - C", operator.sub), ("torch.sub({0}, C)", torch.sub),
            ("torch.subtract({0}, C)", torch.subtract), ("{0}.sub(C)", lambda x, c: x.sub(c))],
    "rsub": [("C - {0}", lambda x, c: c - x), ("torch.sub(C, {0})", lambda x, c: torch.sub(c, x)),
             ("C.sub({0})", lambda x, c: c.sub(x))],
    "mul": [("{0} * C", operator.mul), ("C * {0}", lambda x, c: c * x),
            ("torch.mul({0}, C)", torch.mul), ("torch.mul(C, {0})", lambda x, c: torch.mul(c, x)),
            ("{0}.multiply(C)", lambda x, c: x.multiply(c)), ("C.mul({0})", lambda x, c: c.mul(x))],
    "div": [("{0} / C", operator.truediv), ("torch.div({0}, C)", torch.div),
            ("torch.true_divide({0}, C)", torch.true_divide),
            ("{0}.divide(C)", lambda x, c: x.divide(c))],
}


ALPHA_TABLE = {  # x + alpha * c, x - alpha * c, c + alpha * x, c - alpha * x
    "add": [("torch.add({0}, C, alpha=A)", lambda x, c, a: torch.add(x, c, alpha=a)),
            ("{0}.add(C, alpha=A)", lambda x, c, a: x.add(c, alpha=a))],
    "sub": [("torch.sub({0}, C, alpha=A)", lambda x, c, a: torch.sub(x, c, alpha=a)),
            ("{0}.subtract(C, alpha=A)", lambda x, c, a: x.subtract(c, alpha=a))],
    "radd": [("torch.add(C, {0}, alpha=A)", lambda x, c, a: torch.add(c, x, alpha=a)),
             ("C.add({0}, alpha=A)", lambda x, c, a: c.add(x, alpha=a))],
    "rsub": [("torch.sub(C, {0}, alpha=A)", lambda x, c, a: torch.sub(c, x, alpha=a)),
             ("C.sub({0}, alpha=A)", lambda x, c, a: c.sub(x, alpha=a))],
}


def _tensor_affine(g: _Gen, a: int, kind: str, source: str, reject: bool, alpha=None,
                   alpha_codes=()):
    v = g.vals[a]
    problem = g.pick(["nan", "broadcast", "bool", "int-big", "zero", "subnormal", "rounding"]) \
        if reject and g.chance(60) else None
    if kind != "div" and problem in ("zero", "subnormal", "rounding"):
        problem = "nan"
    dtype = g.pick([v.dtype] * 6 + [torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                    torch.int32, torch.int16, torch.int8, torch.uint8])
    if problem == "nan" and not dtype.is_floating_point:  # ints hold no NaN: a big one
        problem = "int-big"
    if problem == "int-big" or (source == "parameter" and not dtype.is_floating_point):
        dtype = torch.int64 if problem == "int-big" else v.dtype
    shape = () if source == "scalar-buffer" else _constant_shape(g, v.shape, problem == "broadcast")
    scale = g.pick([1.0, 0.5, 1e-3, 100.0, 1e-20, 1e20] + ([1e300] if problem == "nan" else []))
    t = g.tensor(shape, torch.float64, max(scale, 1.0) if not dtype.is_floating_point else scale,
                 [-0.0], positive=kind == "div", integer=not dtype.is_floating_point)
    if not dtype.is_floating_point:  # float -> int conversion out of range is undefined
        info = torch.iinfo(dtype)
        t = t.clamp(max(info.min, -2.0 ** 63), min(info.max, 2.0 ** 62))
    plant = {"nan": g.pick([math.nan, math.inf, -math.inf]),
             "int-big": g.pick([2.0 ** 60, 2.0 ** 53 + 2, -2.0 ** 63]),
             "zero": g.pick([0.0, -0.0]), "subnormal": subnormal(v.dtype)}.get(problem)
    if plant is not None and t.numel():
        t.view(-1)[g.draw(st.integers(0, t.numel() - 1))] = plant
    t = (t > 0) if problem == "bool" else t.to(dtype)
    codes = _affine_codes(t, kind, v) + list(alpha_codes)
    table = AFFINE_TABLE.get(kind, [])
    if alpha is not None:
        table = [(text.replace("A", repr(alpha)), lambda x, c, f=f: f(x, c, alpha))
                 for text, f in ALPHA_TABLE[kind]]
    if problem == "rounding":
        codes.append("affine-rounding-mode")
        table = [("torch.div({0}, C, rounding_mode='trunc')",
                  lambda x, c: torch.div(x, c, rounding_mode="trunc"))]
    if codes and not reject:
        return None
    cmag = 1.0 if t.dtype == torch.bool else _magnitude(t)
    scale = abs(1 if alpha is None else alpha) if not alpha_codes else 1.0
    if kind == "div":
        mag = v.mag / _smallest(t) if not codes else 0.0
    elif kind == "mul":
        mag = v.mag * cmag
    elif kind in ("add", "sub"):
        mag = v.mag + scale * cmag
    else:
        mag = cmag + scale * v.mag
    suffix = "_c_plain" if source == "plain" else "_c"
    if source == "parameter":
        def state():
            return {suffix: nn.Parameter(t.clone(), requires_grad=t.is_floating_point())}
    else:
        def state():
            return {suffix: t.clone()}
    c_text = f"{{m}}{suffix}"
    spellings = [with_state(text.replace("C", c_text), lambda get, x, f=f: f(x, get(suffix)),
                            state, codes) for text, f in table]
    if kind == "div":
        spellings.append(with_state(f"{c_text} / {{0}}", lambda get, x: get(suffix) / x, state,
                                    ["affine-constant-over-tensor", *codes]))
    return g.finish("affine", (a,), spellings, reject, mag)


@family(always_rejected=True)
def constant_computation(g: _Gen, reject: bool):
    """Arithmetic on fixed tensors only, feeding a graph tensor."""
    a = g.operand(lambda v: v.rank >= 1)
    v = g.vals[a]
    state = lambda: {"_c": torch.ones(2, *v.shape, dtype=v.dtype)}  # noqa: E731
    codes = ["constant-computation"]
    spellings = [with_state("{0} + {m}_c[0]", lambda get, x: x + get("_c")[0], state, codes),
                 with_state("{0} + {m}_c.mean(0)", lambda get, x: x + get("_c").mean(0), state,
                            codes),
                 with_state("{0} * ({m}_c[1] * 2.0)", lambda get, x: x * (get("_c")[1] * 2.0),
                            state, codes)]
    return g.finish("constant_computation", (a,), spellings, True)


# --- layout --------------------------------------------------------------------------------


@family(2, module=True)
def flatten(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.rank >= 1)
    r = g.vals[a].rank
    s = g.draw(st.integers(1, r))
    e = g.draw(st.integers(s, r))
    ns, ne = s - r - 1, e - r - 1
    spellings = [
        module(f"nn.Flatten({s}, {e})({{0}})", lambda: nn.Flatten(s, e)),
        module(f"nn.Flatten({ns}, {ne})({{0}})", lambda: nn.Flatten(ns, ne)),
        fn(f"torch.flatten({{0}}, {s}, {e})", lambda x: torch.flatten(x, s, e)),
        fn(f"{{0}}.flatten({ns}, {e})", lambda x: x.flatten(ns, e)),
        fn(f"{{0}}.flatten(start_dim={s}, end_dim={ne})",
           lambda x: x.flatten(start_dim=s, end_dim=ne)),
        fn("{0}.flatten()", lambda x: x.flatten(), ["batch-axis"]),
        fn(f"torch.flatten({{0}}, 0, {e})", lambda x: torch.flatten(x, 0, e), ["batch-axis"]),
        module("nn.Flatten(0)({0})", lambda: nn.Flatten(0), ["batch-axis"]),
    ]
    if e == r:
        spellings += [fn(f"{{0}}.flatten({s})", lambda x: x.flatten(s)),
                      fn(f"torch.flatten({{0}}, start_dim={s})",
                         lambda x: torch.flatten(x, start_dim=s))]
    if s == 1 and e == r:
        spellings.append(module("nn.Flatten()({0})", nn.Flatten))
    if e > s:
        spellings.append(fn(f"{{0}}.flatten({e}, {s})", lambda x: x.flatten(e, s),
                            ["unsupported-argument"]))
    return g.finish("flatten", (a,), spellings, reject, g.vals[a].mag)


def _factor(g: _Gen, n: int) -> tuple[int, ...]:
    """A random per-sample shape with n elements (1 to 3 axes)."""
    parts = [n]
    for _ in range(g.draw(st.integers(0, 2))):
        k = parts.pop()
        divisors = [d for d in range(1, k + 1) if k % d == 0]
        d = g.pick(divisors)
        parts += [d, k // d]
    return tuple(parts)


@family(3)
def reshape(g: _Gen, reject: bool):
    """Reshape: reshape/view/squeeze/unsqueeze, all of one per-sample target shape."""
    a = g.operand()
    v = g.vals[a]
    shape, r = v.shape, v.rank
    n = math.prod(shape)
    how = g.pick(["factor", "unsqueeze", "squeeze"] if 1 in shape else ["factor", "unsqueeze"])
    if how == "unsqueeze":
        d = g.draw(st.integers(1, r + 1))
        target = shape[:d - 1] + (1,) + shape[d - 1:]
    elif how == "squeeze":
        d = g.pick([i + 1 for i, size in enumerate(shape) if size == 1])
        target = shape[:d - 1] + shape[d:]
    else:
        target = _factor(g, n) if n else shape
    t = ", ".join(map(str, target))
    spellings = [
        fn(f"{{0}}.reshape(-1, {t})", lambda x: x.reshape(-1, *target)),
        fn(f"{{0}}.reshape((-1, {t}))", lambda x: x.reshape((-1, *target))),
        fn(f"torch.reshape({{0}}, (-1, {t}))", lambda x: torch.reshape(x, (-1, *target))),
        fn(f"{{0}}.view(-1, {t})", lambda x: x.view(-1, *target)),
        fn(f"{{0}}.view([-1, {t}])", lambda x: x.view([-1, *target])),
    ]
    if how == "unsqueeze":
        spellings += [fn(f"{{0}}.unsqueeze({d})", lambda x: x.unsqueeze(d)),
                      fn(f"torch.unsqueeze({{0}}, {d - r - 2})",
                         lambda x: torch.unsqueeze(x, d - r - 2))]
    if how == "squeeze":
        nd = d - r - 1
        spellings += [fn(f"{{0}}.squeeze({d})", lambda x: x.squeeze(d)),
                      fn(f"torch.squeeze({{0}}, {nd})", lambda x: torch.squeeze(x, nd)),
                      fn(f"{{0}}.squeeze(({d},))", lambda x: x.squeeze((d,)))]
    spellings += [
        fn("{0}.view({0}.size(0), -1)", lambda x: x.view(x.size(0), -1), ["unsupported-method"]),
        fn("{0}.reshape({0}.shape[0], -1)", lambda x: x.reshape(x.shape[0], -1),
           ["unsupported-function"]),
        fn("{0}.unsqueeze(0)", lambda x: x.unsqueeze(0), ["batch-axis"]),
        fn(f"torch.unsqueeze({{0}}, {-r - 2})", lambda x: torch.unsqueeze(x, -r - 2),
           ["batch-axis"]),
        fn("{0}.squeeze(0)", lambda x: x.squeeze(0), ["batch-axis"]),
        fn("{0}.squeeze()", lambda x: x.squeeze(), ["squeeze-without-dim"]),
        fn(f"{{0}}.reshape(-1, {float(n)})", lambda x: x.reshape(-1, float(n)),
           ["unsupported-argument"]),
    ]
    if n > 1:
        spellings += [fn("{0}.view(-1)", lambda x: x.reshape(-1), ["batch-not-preserved"]),
                      fn("{0}.reshape(2, -1)", lambda x: x.reshape(2, -1),
                         ["batch-not-preserved", "shape-propagation"])]
    return g.finish("reshape", (a,), spellings, reject, v.mag)


@family()
def permute(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.rank >= 1)
    r = g.vals[a].rank
    perm = [p + 1 for p in g.draw(st.permutations(range(r)))]
    neg = [p - r - 1 for p in perm]
    spellings = [
        fn(f"{{0}}.permute(0, {', '.join(map(str, perm))})", lambda x: x.permute(0, *perm)),
        fn(f"{{0}}.permute({[0, *neg]})", lambda x: x.permute([0, *neg])),
        fn(f"torch.permute({{0}}, {(0, *perm)})", lambda x: torch.permute(x, (0, *perm))),
        fn(f"{{0}}.permute(dims={(-r - 1, *perm)})", lambda x: x.permute(dims=(-r - 1, *perm))),
    ]
    if r >= 1:
        bad = [perm[0], 0, *perm[1:]]
        spellings.append(fn(f"{{0}}.permute({bad})", lambda x: x.permute(bad), ["batch-axis"]))
    return g.finish("permute", (a,), spellings, reject, g.vals[a].mag)


@family()
def transpose(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.rank >= 1)
    r = g.vals[a].rank
    d0, d1 = g.draw(st.integers(1, r)), g.draw(st.integers(1, r))
    n0, n1 = d0 - r - 1, d1 - r - 1
    spellings = [
        fn(f"{{0}}.transpose({d0}, {d1})", lambda x: x.transpose(d0, d1)),
        fn(f"{{0}}.transpose({d1}, {n0})", lambda x: x.transpose(d1, n0)),
        fn(f"torch.transpose({{0}}, {n0}, {n1})", lambda x: torch.transpose(x, n0, n1)),
        fn(f"{{0}}.transpose(dim0={d0}, dim1={d1})", lambda x: x.transpose(dim0=d0, dim1=d1)),
        fn(f"{{0}}.transpose(0, {d1})", lambda x: x.transpose(0, d1), ["batch-axis"]),
        fn(f"{{0}}.swapaxes({d0}, {d1})", lambda x: x.swapaxes(d0, d1), ["unsupported-method"]),
    ]
    if r == 1:
        spellings.append(fn("{0}.t()", lambda x: x.t(), ["unsupported-method"]))
    return g.finish("transpose", (a,), spellings, reject, g.vals[a].mag)


@family(2)
def mean(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.rank >= 1 and 0 not in v.shape)
    r = g.vals[a].rank
    dims = sorted(g.draw(st.sets(st.integers(1, r), min_size=1)))
    neg = [d - r - 1 for d in dims]
    keep = g.draw(st.booleans())
    one = dims[0] if len(dims) == 1 else tuple(dims)
    spellings = [
        fn(f"{{0}}.mean({one}, {keep})", lambda x: x.mean(one, keep)),
        fn(f"{{0}}.mean(dim={neg}, keepdim={keep})", lambda x: x.mean(dim=neg, keepdim=keep)),
        fn(f"torch.mean({{0}}, {tuple(dims)}, {keep})", lambda x: torch.mean(x, tuple(dims), keep)),
        fn(f"torch.mean({{0}}, dim={one}, keepdim={keep})",
           lambda x: torch.mean(x, dim=one, keepdim=keep)),
        fn("{0}.mean()", lambda x: x.mean(), ["mean-without-dim"]),
        fn("torch.mean({0})", lambda x: torch.mean(x), ["mean-without-dim"]),
        fn(f"{{0}}.mean((0, {dims[0]}))", lambda x: x.mean((0, dims[0])), ["batch-axis"]),
        fn(f"{{0}}.mean({one}, dtype=torch.float64)", lambda x: x.mean(one, dtype=torch.float64),
           ["mean-dtype"]),
        with_state(f"torch.mean({{0}}, {one}, out={{m}}_out)",
                   lambda get, x: torch.mean(x, one, out=get("_out")),
                   lambda: {"_out": torch.zeros(1, dtype=g.vals[a].dtype)}, ["out-argument"]),
    ]
    if not keep:
        spellings.append(fn(f"{{0}}.mean({one})", lambda x: x.mean(one)))
    return g.finish("mean", (a,), spellings, reject, g.vals[a].mag)


def _index_item(g: _Gen, size: int):
    kind = g.pick(["int", "slice", "slice", "full"])
    if kind == "int" and size:
        return g.draw(st.integers(-size, size - 1))
    if kind == "slice":
        start = g.pick([None, *range(-size, size + 1)])
        stop = g.pick([None, *range(-size, size + 2)])
        step = g.pick([None, 1, 2, 3])
        return slice(start, stop, step)
    return slice(None)


def _show(item) -> str:
    if item is None:
        return "None"
    if item is Ellipsis:
        return "..."
    if isinstance(item, slice):
        parts = ["" if p is None else str(p) for p in (item.start, item.stop, item.step)]
        return ":".join(parts if item.step is not None else parts[:2])
    return repr(item)


@family(3)
def getitem(g: _Gen, reject: bool):
    a = g.operand()
    shape = g.vals[a].shape
    items: list[Any] = [_index_item(g, size) for size in shape[:g.draw(st.integers(0, len(shape)))]]
    for _ in range(g.draw(st.integers(0, 2))):
        items.insert(g.draw(st.integers(0, len(items))), None)
    if g.chance(30):
        items.insert(g.draw(st.integers(0, len(items))), Ellipsis)
    index = (slice(None), *items)
    text = "{0}[" + ", ".join(map(_show, index)) + "]"
    spellings = [fn(text, lambda x: x[index])]
    if Ellipsis not in items:
        alt = (slice(None), *items, Ellipsis)
        spellings.append(fn("{0}[" + ", ".join(map(_show, alt)) + "]", lambda x: x[alt]))
    first = shape[0] if shape else 1
    spellings += [
        fn("{0}[0]", lambda x: x[0], ["batch-axis"]),
        fn("{0}[1:]", lambda x: x[1:], ["batch-axis"]),
        fn("{0}[None]", lambda x: x[None], ["batch-axis"]),
        fn("{0}[..., None, :]" if not shape else "{0}[-1, ...]",
           (lambda x: x[..., None, :]) if not shape else (lambda x: x[-1, ...]),
           ["batch-axis"] if shape else ["batch-axis", "unsupported-argument", "rank"]),
    ]
    if shape:
        spellings += [
            fn("{0}[:, [0]]", lambda x: x[:, [0]], ["advanced-indexing"]),
            with_state("{0}[:, {m}_i]", lambda get, x: x[:, get("_i")],
                       lambda: {"_i": torch.zeros(1, dtype=torch.long)}, ["advanced-indexing"]),
            fn("{0}[:, ::-1]", lambda x: x[:, ::-1], ["unsupported-argument"]),
            fn(f"{{0}}[:, {first}]", lambda x: x[:, first], ["unsupported-argument"]),
            fn("{0}[:, ..., ...]", lambda x: x[:, ..., ...], ["unsupported-argument"]),
            fn("{0}[:, 1.5]", lambda x: x[:, 1.5], ["advanced-indexing"]),
        ]
    return g.finish("getitem", (a,), spellings, reject, g.vals[a].mag)


# --- layers --------------------------------------------------------------------------------


def _weights(g: _Gen, shape, fan_in: int, mag_in: float, bad: bool) -> torch.Tensor:
    """Weights scaled so that the output stays below MAG_LIMIT; NaN/Inf planted if `bad`."""
    room = MAG_LIMIT / max(mag_in, 1e-300) / max(fan_in, 1) / 10
    scale = min(g.pick([1e-3, 0.3, 1.0, 3.0, 1e-20, 1e6]), room)
    sub = subnormal(g.dtype)
    specials = [math.nan, math.inf, -math.inf] if bad else [-0.0, 0.0, sub, -sub, 1e-30]
    t = g.tensor(shape, g.dtype, scale, specials)
    if bad and t.numel() and bool(torch.isfinite(t).all()):
        t.view(-1)[0] = math.nan
    return t


def _set(module: nn.Module, **tensors) -> nn.Module:
    with torch.no_grad():
        for name, value in tensors.items():
            if value is not None:
                getattr(module, name).copy_(value)
    return module


@family(3, module=True)
def linear(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.rank >= 1 and v.dtype == g.dtype and v.shape[-1] > 0)
    v = g.vals[a]
    n_in, n_out = v.shape[-1], g.pick([1, 2, 3, 4, 17])
    bias = g.draw(st.booleans())
    bad = reject and g.chance(40)
    w = _weights(g, (n_out, n_in), n_in, v.mag, False)
    b = _weights(g, (n_out,), 1, v.mag, False) if bias else None
    if bad:
        target = b if b is not None and g.chance(50) else w
        target.view(-1)[g.draw(st.integers(0, target.numel() - 1))] = g.pick(
            [math.nan, math.inf, -math.inf])
    codes = ["constant-not-finite"] if bad else []
    mag = v.mag * float(w.double().abs().sum(1).max()) + (_magnitude(b) if b is not None else 0)
    dt = g.dtype

    def make():
        return _set(nn.utils.skip_init(nn.Linear, n_in, n_out, bias=bias, dtype=dt),
                    weight=w, bias=b)

    def state():
        return {"_w": nn.Parameter(w.clone()), **({"_b": nn.Parameter(b.clone())} if bias else {})}
    spellings = [
        module(f"nn.Linear({n_in}, {n_out}, bias={bias})({{0}})", make, codes),
        with_state("F.linear({0}, {m}_w, " + ("{m}_b)" if bias else "None)"),
                   lambda get, x: F.linear(x, get("_w"), get("_b") if bias else None),
                   state, codes),
        with_state("F.linear({0}, weight={m}_w" + (", bias={m}_b)" if bias else ")"),
                   lambda get, x: F.linear(x, weight=get("_w"), bias=get("_b"))
                   if bias else F.linear(x, weight=get("_w")), state, codes),
        with_state("F.linear({0}, {m}_w * 1.0)", lambda get, x: F.linear(x, get("_w") * 1.0),
                   state, ["constant-computation"]),
    ]
    if v.rank == 1:
        spellings.append(fn("F.linear({0}, {0})", lambda x: F.linear(x, x), ["runtime-weight"]))
    return g.finish("linear", (a,), spellings, reject, mag)


@family(3, module=True)
def conv2d(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.dtype == g.dtype and v.rank >= 1 and 0 not in v.shape
                  and (reject or v.rank == 3))
    v = g.vals[a]
    wrong_rank = v.rank != 3
    cin = v.shape[0]
    groups = g.pick([d for d in range(1, cin + 1) if cin % d == 0])
    cout = groups * g.draw(st.integers(1, 2))
    kh, kw = g.draw(st.integers(1, 3)), g.draw(st.integers(1, 3))
    stride = g.pick([1, 2, (1, 2)])
    dilation = g.pick([1, 1, 2, (2, 1)])
    padding = g.pick([0, 1, (0, 1), "valid"] + (["same"] if stride == 1 else []))
    mode = g.pick(["zeros", "zeros", "reflect", "replicate", "circular"]) \
        if isinstance(padding, int) and padding else "zeros"
    bias = g.draw(st.booleans())
    bad = reject and not wrong_rank and g.chance(40)
    fan = cin // groups * kh * kw
    w = _weights(g, (cout, cin // groups, kh, kw), fan, v.mag, bad)
    b = _weights(g, (cout,), 1, v.mag, False) if bias else None
    codes = ["rank"] if wrong_rank else ["constant-not-finite"] if bad else []
    mag = v.mag * float(w.double().abs().sum((1, 2, 3)).max()) + (_magnitude(b) if bias else 0)
    dt = g.dtype

    def make():
        return _set(nn.utils.skip_init(nn.Conv2d, cin, cout, (kh, kw), stride, padding, dilation,
                                       groups, bias, mode, dtype=dt), weight=w, bias=b)

    def state():
        return {"_w": nn.Parameter(w.clone()), **({"_b": nn.Parameter(b.clone())} if bias else {})}
    args = f"{cin}, {cout}, {(kh, kw)}, {stride!r}, {padding!r}, {dilation!r}, {groups}, {bias}"
    spellings = [module(f"nn.Conv2d({args}, {mode!r})({{0}})", make, codes)]
    if mode == "zeros":
        spellings += [
            with_state(f"F.conv2d({{0}}, {{m}}_w, {'{m}_b' if bias else None}, {stride!r}, "
                       f"{padding!r}, {dilation!r}, {groups})",
                       lambda get, x: F.conv2d(x, get("_w"), get("_b") if bias else None, stride,
                                               padding, dilation, groups), state, codes),
            with_state(f"F.conv2d({{0}}, {{m}}_w, stride={stride!r}, padding={padding!r}, "
                       f"dilation={dilation!r}, groups={groups}, bias=...)",
                       lambda get, x: F.conv2d(x, get("_w"), stride=stride, padding=padding,
                                               dilation=dilation, groups=groups,
                                               bias=get("_b") if bias else None), state, codes)]
    return g.finish("conv2d", (a,), spellings, reject or wrong_rank, mag)


@family(2, module=True)
def batch_norm(g: _Gen, reject: bool):
    a = g.operand(lambda v: 1 <= v.rank <= 3 and v.dtype == g.dtype and 0 not in v.shape)
    v = g.vals[a]
    c = v.shape[0]
    two_d = v.rank == 3
    wrong_rank = reject and g.chance(15)
    if wrong_rank:
        two_d = not two_d
    cls = nn.BatchNorm2d if two_d else nn.BatchNorm1d
    problem = g.pick(["training", "no-stats", "negative-var", "nan", "tiny-divisor", "eps"]) \
        if reject and not wrong_rank and g.chance(70) else None
    eps = g.pick([0.0, 1e-40, 1e-320] if problem == "tiny-divisor"
                 else [math.nan, math.inf] if problem == "eps"
                 else [1e-5, 1e-3, 0.1, 1.0, 1e-30])
    affine_ = g.draw(st.booleans())
    mean_ = g.tensor((c,), g.dtype, g.pick([1.0, 100.0, 1e-3]), [-0.0])
    if problem == "nan":
        mean_[g.draw(st.integers(0, c - 1))] = g.pick([math.nan, math.inf])
    var = g.tensor((c,), g.dtype, g.pick([1.0, 1e-3, 100.0]), [0.0], positive=True)
    if problem == "negative-var":
        var[0] = -0.5
    if problem == "tiny-divisor":
        var[g.draw(st.integers(0, c - 1))] = g.pick([0.0, 1e-45, subnormal(g.dtype)])
    weight = g.tensor((c,), g.dtype, 1.0, [-0.0, 0.0]) if affine_ else None
    bias = g.tensor((c,), g.dtype, 1.0, [-0.0]) if affine_ else None
    smallest = float((var.double() + eps).min())
    inv = 1.0 / math.sqrt(max(smallest, 1e-300))
    mag = (v.mag + _magnitude(mean_)) * inv * (_magnitude(weight) if affine_ else 1.0) \
        + (_magnitude(bias) if affine_ else 0.0)
    codes = {None: [], "training": ["batch-norm-training"],
             "no-stats": ["batch-norm-no-running-stats"],
             "negative-var": ["batch-norm-negative-var"], "nan": ["constant-not-finite"],
             "tiny-divisor": [], "eps": ["constant-not-finite"]}[problem]
    if problem not in ("training", "no-stats", "negative-var", "eps") and \
            smallest < torch.finfo(g.dtype).tiny:  # sqrt(var + eps) has no relative bound
        codes.append("constant-subnormal")
    if wrong_rank:
        codes = ["rank", *codes]
    dt = g.dtype

    def make():
        bn = cls(c, eps=eps, affine=affine_, track_running_stats=problem != "no-stats", dtype=dt)
        if problem != "no-stats":
            _set(bn, running_mean=mean_, running_var=var)
        return _set(bn, weight=weight, bias=bias)
    text = f"{cls.__name__}({c}, eps={eps}, affine={affine_}" + \
        (", track_running_stats=False" if problem == "no-stats" else "") + ")"
    spellings = [module(f"nn.{text}({{0}})", make, codes, train=problem == "training")]
    return g.finish("batch_norm", (a,), spellings, reject, mag if not codes else 0.0)


def _padding_only_window(sizes, k, stride, pad, dil, ceil) -> bool:
    """Whether some window of a max pooling lies wholly in the padding (PyTorch's output
    sizes, the last window dropped when it starts in the right padding)."""
    strides = k if stride is None else (stride, stride) if isinstance(stride, int) else stride
    for n, kk, s, p in zip(sizes, k, strides, pad):
        span = n + 2 * p - dil * (kk - 1) - 1  # may be negative: ceil_mode still gives 1
        out = (-(-span // s) if ceil else span // s) + 1
        if ceil and (out - 1) * s >= n + p:
            out -= 1
        if any(not any(0 <= o * s - p + j * dil < n for j in range(kk)) for o in range(out)):
            return True
    return False


@family(3, module=True)
def pool(g: _Gen, reject: bool):
    a = g.operand(lambda v: v.dtype == g.dtype and v.rank >= 1 and 0 not in v.shape
                  and (reject or v.rank == 3))
    v = g.vals[a]
    wrong_rank = v.rank != 3
    kind = g.pick(["max", "avg", "adaptive"])
    k = (g.draw(st.integers(1, 3)), g.draw(st.integers(1, 3)))
    stride = g.pick([None, 1, 2, (2, 1)])
    pad = (g.draw(st.integers(0, k[0] // 2)), g.draw(st.integers(0, k[1] // 2)))
    ceil = g.draw(st.booleans())
    codes = ["rank"] if wrong_rank else []
    mag = v.mag
    if kind == "max":
        dil = g.pick([1, 2])
        mcodes = codes
        if not wrong_rank and _padding_only_window(v.shape[-2:], k, stride, pad, dil, ceil):
            if reject:  # the maximum of nothing: -inf
                mcodes = [*codes, "unsupported-argument"]
            else:
                dil = 1  # a window of contiguous taps, padded at most half, holds an element
        spellings = [
            module(f"nn.MaxPool2d({k}, {stride}, {pad}, {dil}, ceil_mode={ceil})({{0}})",
                   lambda: nn.MaxPool2d(k, stride, pad, dil, ceil_mode=ceil), mcodes),
            fn(f"F.max_pool2d({{0}}, {k}, {stride}, {pad}, {dil}, {ceil})",
               lambda x: F.max_pool2d(x, k, stride, pad, dil, ceil), mcodes),
            fn(f"F.max_pool2d({{0}}, kernel_size={k}, stride={stride}, padding={pad}, "
               f"dilation={dil}, ceil_mode={ceil})",
               lambda x: F.max_pool2d(x, kernel_size=k, stride=stride, padding=pad,
                                      dilation=dil, ceil_mode=ceil), mcodes),
            module(f"nn.MaxPool2d({k}, return_indices=True)({{0}})",
                   lambda: nn.MaxPool2d(k, return_indices=True), ["pool-return-indices", *codes]),
        ]
    elif kind == "avg":
        include = g.draw(st.booleans())
        bad_divisor = reject and g.chance(30)
        divisor = 0 if bad_divisor else g.pick([None, None, 1, 3, -2, 7])
        dcodes = ["unsupported-argument"] if bad_divisor else []
        spellings = [
            module(f"nn.AvgPool2d({k}, {stride}, {pad}, {ceil}, {include}, {divisor})({{0}})",
                   lambda: nn.AvgPool2d(k, stride, pad, ceil, include, divisor),
                   [*codes, *dcodes]),
            fn(f"F.avg_pool2d({{0}}, {k}, {stride}, {pad}, {ceil}, {include}, {divisor})",
               lambda x: F.avg_pool2d(x, k, stride, pad, ceil, include, divisor),
               [*codes, *dcodes]),
        ]
        if divisor:
            mag = v.mag * k[0] * k[1] / abs(divisor)
    else:
        out = g.pick([(1, 1), (2, 3), 2, (None, 1), (3, None), 1, (5, 4)])
        spellings = [
            module(f"nn.AdaptiveAvgPool2d({out})({{0}})", lambda: nn.AdaptiveAvgPool2d(out), codes),
            fn(f"F.adaptive_avg_pool2d({{0}}, {out})", lambda x: F.adaptive_avg_pool2d(x, out),
               codes),
            fn(f"F.adaptive_avg_pool2d({{0}}, output_size={out})",
               lambda x: F.adaptive_avg_pool2d(x, output_size=out), codes),
        ]
    return g.finish("pool", (a,), spellings, reject or wrong_rank, mag)


@family(2)
def reuse(g: _Gen, reject: bool):
    """An earlier step's module or parameters called again on another value (weight tying
    when it has state), in whatever spelling that step has."""
    if g.steps is None:
        raise _Skip
    n = len(g.vals) - len(g.steps)
    targets = [j for j, t in enumerate(g.steps)
               if not t.body and not t.expect and len(t.args) == 1 and t.family != "reuse"
               and g.vals[n + j] is not None]
    if not targets:
        raise _Skip
    j = g.pick(targets)
    src = g.vals[g.steps[j].args[0]]
    a = g.operand(lambda v: v.shape == src.shape and v.dtype == src.dtype)
    out = _run(g.steps[j].spelling, [g.vals[a].example])
    mag = g.vals[n + j].mag * max(1.0, g.vals[a].mag / max(src.mag, 1e-300))
    if not isinstance(out, torch.Tensor) or not mag <= MAG_LIMIT:
        return None
    spelling = Spelling(f"s{j}'s spelling again({{0}})",
                        lambda m, name, x: m.steps[j].spelling.call(m, f"s{j}", x))
    g.vals.append(_val(out, mag))
    return Step("reuse", (a,), (spelling,))


# --- containers ----------------------------------------------------------------------------


@family(3, nested=True)
def block(g: _Gen, reject: bool):
    """A sub-program in a user-defined module, an nn.Sequential or inline; residual when its
    output has the input's shape and dtype."""
    a = g.operand()
    v = g.vals[a]
    container = g.pick(["block", "inline", *CHAIN_CONTAINERS])
    chain = container in CHAIN_CONTAINERS  # each step takes the previous one's value
    inner = _Gen(g.draw, g.dtype, [v], g.reject_percent if reject else 0, g.depth + 1,
                 module_only=chain)
    body: list[Step] = []
    for _ in range(g.draw(st.integers(1, 3))):
        if inner.vals[-1] is None:
            break
        real = inner.vals
        if chain:
            inner.vals = [None] * (len(real) - 1) + [real[-1]]
        step = inner.step()
        inner.vals = real + inner.vals[len(real):]
        if step is not None:
            body.append(step)
    if not body:
        return None
    out = inner.vals[-1]
    residual = ""
    if out is not None and out.shape == v.shape and out.dtype == v.dtype and g.chance(60):
        residual = g.pick(list(RESIDUALS)[1:])
    if out is not None and residual:
        out = Val(v.shape, v.dtype, v.mag + out.mag, v.example + out.example)
    g.vals.append(out)
    return Step("block", (a,), body=tuple(body), container=container, residual=residual)


# --- programs ------------------------------------------------------------------------------


def per_sample_shapes():
    images = st.tuples(st.integers(1, 3), st.integers(1, 6), st.integers(1, 6))
    wide = st.tuples(st.sampled_from([16, 33, 64]))
    return st.one_of(images, st.tuples(st.integers(1, 6)), images,
                     st.tuples(st.integers(1, 4), st.integers(1, 4)), images, wide)


@st.composite
def programs(draw, accepted_only: bool = False, max_steps: int = 7) -> Program:
    """A random program; with `accepted_only`, every step and the output are accepted."""
    dtype = draw(st.sampled_from(DTYPES))
    shapes = [draw(per_sample_shapes())]
    for _ in range(draw(st.integers(0, 2))):
        shapes.append(shapes[0] if draw(st.booleans()) else draw(per_sample_shapes()))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2 ** 31 - 1)))
    vals = [Val(s, dtype, INPUT_MAG, torch.randn((EXAMPLE_BATCH, *s), generator=g, dtype=dtype))
            for s in shapes]
    reject_percent = 0 if accepted_only else draw(st.sampled_from([0, 0, 15, 30, 60]))
    gen = _Gen(draw, dtype, vals, reject_percent)
    steps: list[Step] = []
    gen.steps = steps
    for _ in range(draw(st.integers(1, max_steps))):
        step = gen.step()
        if step is not None:
            steps.append(step)
        assert len(gen.vals) == len(shapes) + len(steps), "a discarded step left a value"
    usable = gen.usable()
    outputs = [usable[-1], *draw(st.lists(st.sampled_from(usable), max_size=2))]
    forms = ["single", "tuple", "list"]
    if not accepted_only and draw(st.integers(0, 99)) >= 100 - reject_percent // 2:
        forms = [f for f, code in OUTPUT_FORMS.items() if code]
    form = draw(st.sampled_from(forms))
    if form == "single":
        outputs = outputs[:1]
    extra = not accepted_only and reject_percent > 0 and draw(st.integers(0, 99)) >= 97
    bits = st.integers(0, 2 ** 30 - 1)
    return Program(dtype, tuple(shapes), tuple(steps), tuple(outputs), form, extra,
                   draw(bits) if draw(st.booleans()) else 0,
                   draw(bits) if draw(st.booleans()) else 0, draw(st.booleans()))


# --- respelling ----------------------------------------------------------------------------


def respell(draw, program: Program) -> Program:
    """The same program with every step written in another accepted spelling of its group
    (containers included)."""
    return replace(program, steps=tuple(_respell(draw, s, False) for s in program.steps))


def _respell(draw, step: Step, module_only: bool) -> Step:
    if step.body:
        chain = step.container in CHAIN_CONTAINERS
        container = draw(st.sampled_from(["block", "inline", *(CHAIN_CONTAINERS if chain else ())]))
        inner_module_only = container in CHAIN_CONTAINERS
        body = tuple(_respell(draw, s, inner_module_only) for s in step.body)
        residual = draw(st.sampled_from(list(RESIDUALS)[1:])) if step.residual else ""
        return replace(step, body=body, container=container, residual=residual)
    options = [i for i, s in enumerate(step.spellings)
               if not s.expect and (s.module or not module_only)]
    return replace(step, chosen=draw(st.sampled_from(options)))

