"""The argument parser of the `ncet` command: subcommands, options, help and usage errors."""

from __future__ import annotations

import argparse
import math
import re
import textwrap

from ..examples import EXAMPLES
from . import adjudicating, commands, diffing, importing, margining, suites
from .exporting import MAX_SAMPLES
from .records import ncet_version
from .targets import FORMS_HELP

DESCRIPTION = """\
Convert a PyTorch model (or read an ONNX file) to GraphIR, report every node that does not
convert and why, and certify that the conversion is exact."""

EPILOG = f"""\
examples:
  ncet demo                                     a bundled model, converted and evaluated
  ncet inspect mypkg.models:Net --input-shape 3,32,32 --eval
  ncet check models.py:build --input-shape 16 --eval
  ncet convert mlp -o mlp.ncet && ncet show mlp.ncet
  ncet export mlp -o mlp.onnx --profile verifier --lint eran --check
  ncet report residual_cnn -o report.html       one self-contained HTML file
  ncet diff before.ncet after.ncet              what changed between two GraphIRs
  ncet import net.onnx -o net.ncet              an ONNX file read into GraphIR, certified
  ncet adjudicate net.onnx prop.vnnlib x.counterexample   a verifier's counterexample judged
  ncet margin net.onnx prop.vnnlib -o t.vnnlib  the float32 margin, the property tightened

{textwrap.fill(FORMS_HELP, 88)}

exit status: 0 success; 1 the model is rejected, the ONNX export is refused, an ONNX file's
node is refused, an exactness check fails, a lint tool has findings or a file is malformed;
2 usage error (bad arguments, a TARGET that cannot be loaded, a missing file); 130 Ctrl-C.
`ncet diff`, like diff: 0 same, 1 different, 2 when A or B cannot be compared.

Run `ncet COMMAND --help` for a command's options."""

COMMAND_EXAMPLES = {
    "demo": ("ncet demo", "ncet demo many_problems", "ncet demo lenet --json"),
    "inspect": ("ncet inspect mypkg.models:Net --input-shape 3,32,32 --eval",
                "ncet inspect models.py:two_inputs --input-shape 4 --input-shape 4",
                "ncet inspect many_problems --json"),
    "check": ("ncet check models.py:build --input-shape 16 --eval",
              "ncet check residual_cnn --samples 8 --json"),
    "convert": ("ncet convert mypkg.models:Net --input-shape 3,32,32 --eval -o net.ncet",),
    "export": ("ncet export mlp -o mlp.onnx",
               "ncet export mypkg.models:Net --input-shape 3,32,32 --eval -o net.onnx "
               "--profile verifier --lint eran --lint marabou",
               "ncet export residual_cnn -o cnn.onnx --batch 1 --check --samples 8 --json",
               "ncet export mypkg.models:Net --input-shape 3,32,32 --eval -o net.onnx "
               "--simplify --profile verifier --lint eran --check"),
    "show": ("ncet show net.ncet", "ncet show net.ncet --json"),
    "diff": ("ncet diff before.ncet after.ncet",
             "ncet diff net.ncet mypkg.models:Net --input-shape 3,32,32 --eval --json",
             "ncet diff small.py:Net wide.py:Net --input-shape-a 16 --input-shape-b 32"),
    "import": ("ncet import net.onnx",
               "ncet import net.onnx --no-check --json",
               "ncet import ACASXU_run2a_1_1_batch_2000.onnx --samples 8 -o acasxu.ncet",
               "ncet import net.onnx --export net.verifier.onnx --profile verifier --lint eran "
               "--check"),
    "adjudicate": ("ncet adjudicate ACASXU_run2a_1_2_batch_2000.onnx prop_2.vnnlib "
                   "prop_2.counterexample",
                   "ncet adjudicate net.ncet prop.vnnlib x.counterexample --json",
                   "ncet adjudicate --many instances.csv",
                   "ncet adjudicate --many ../shared/vnncomp --json"),
    "margin": ("ncet margin ACASXU_run2a_1_1_batch_2000.onnx prop_3.vnnlib",
               "ncet margin net.onnx prop.vnnlib -o prop.tightened.vnnlib",
               "ncet margin net.ncet prop.vnnlib --input-rounding --json"),
    "report": ("ncet report residual_cnn -o report.html",
               "ncet report mypkg.models:Net --input-shape 3,32,32 --eval -o net.html",
               "ncet report mlp -o mlp.html --export --profile verifier --lint eran --check"),
}
"""Shown under each command's --help."""

_SHAPE = re.compile(r"\s*\d+\s*(,\s*\d+\s*)*,?\s*")


def input_shape(text: str) -> tuple[int, ...]:
    """Parse `3,32,32` into (3, 32, 32); the argparse type of --input-shape."""
    inner = text.strip()
    if inner[:1] in "([" and inner[-1:] in ")]":
        inner = inner[1:-1]
    if not _SHAPE.fullmatch(inner) or any(int(d) == 0 for d in inner.split(",") if d.strip()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a per-sample shape. Type positive integers separated by commas, "
            "without the batch axis, e.g. --input-shape 3,32,32 (one --input-shape per "
            "forward() argument)")
    shape = tuple(int(d) for d in inner.split(",") if d.strip())
    if math.prod(shape) > MAX_SAMPLE_ELEMENTS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is {math.prod(shape):,} elements per sample, more than "
            f"{MAX_SAMPLE_ELEMENTS:,}: give the per-sample shape, without the batch axis")
    return shape


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="ncet", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ncet {ncet_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands")

    target = _target_options()
    json_only = argparse.ArgumentParser(add_help=False)
    json_only.add_argument("--json", action="store_true",
                           help="print one JSON object on stdout (stable keys) instead of text")
    checking = _check_options()
    exporting = _export_options()
    simplifying = _export_options(simplify=True)  # export and import --export; not report

    demo = _command(sub, "demo", commands.run_demo, [json_only],
                    "convert a bundled model, print its mapping table and evaluate it",
                    "Convert a bundled example model, print its per-node mapping table and "
                    "compare evaluate(ir) with the model itself in float64.")
    demo.add_argument("example", nargs="?", default="residual_cnn", choices=sorted(EXAMPLES),
                      metavar="EXAMPLE", help="which bundled model: "
                      f"{', '.join(sorted(EXAMPLES))} (default: residual_cnn)")

    _command(sub, "inspect", commands.run_inspect, [target, json_only],
             "print the mapping table and whether the model converts",
             "Print what NCET makes of every FX node of the model, every problem with its "
             "reason and hint, and a one-line verdict. Exit status 0 when the model converts, "
             "1 when it is rejected.")
    _command(sub, "check", commands.run_check, [target, checking, json_only],
             "convert, then certify exactness node by node",
             "Convert the model, then run check_exactness: every node's PyTorch value against "
             "the GraphIR reference, within the certified floating-point bound. Prints the "
             "per-node table and the verdict. Exit status 0 when exact, 1 otherwise.")
    convert = _command(sub, "convert", commands.run_convert, [target, json_only],
                       "convert and save the GraphIR to a file",
                       "Convert the model and save its GraphIR to one self-contained file "
                       "(read it back with `ncet show` or ncet.load). Exit status 1, and no "
                       "file written, when the model is rejected.")
    convert.add_argument("-o", "--output", required=True, metavar="FILE",
                         help="where to write the GraphIR, e.g. model.ncet")
    export = _command(sub, "export", commands.run_export,
                      [target, simplifying, checking, json_only],
                      "convert and write the model as ONNX, lint and certify the file",
                      "Convert the model and write its GraphIR as one ONNX file (ncet.to_onnx, "
                      "docs/export.md), atomically. With --lint TOOL, list every node TOOL "
                      "would reject or silently mis-handle; with --check, certify the file in "
                      "onnxruntime against the GraphIR, node by node (ncet.check_onnx). Exit "
                      "status 0 when the file is written and passes every lint and check asked "
                      "for; 1 when the model is rejected, the profile cannot express it "
                      "exactly or --simplify's certificate does not hold (nothing written), "
                      "or when a lint tool has findings or the "
                      "check fails (the file is still written); 2 for usage errors.")
    export.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="where to write the ONNX model, e.g. model.onnx")
    show = _command(sub, "show", commands.run_show, [json_only],
                    "print a saved GraphIR file",
                    "Load a GraphIR file written by `ncet convert` or ncet.save (nothing in it "
                    "is executed) and print its constants and nodes. Exit status 1 when the "
                    "file is malformed.")
    show.add_argument("file", metavar="FILE", help="a GraphIR file, e.g. model.ncet")
    show.add_argument("--max-check-bytes", type=_limit, default=None, metavar="N", help=(
        "memory the meaning check of a trusted file may use (default: in proportion to the "
        "file's size, see docs/file-format.md)"))
    show.add_argument("--max-check-work", type=_limit, default=None, metavar="N", help=(
        "multiply-adds and element visits the meaning check may do (default: in proportion "
        "to the file's size)"))
    diff = _command(sub, "diff", diffing.run_diff, [json_only],
                    "compare two GraphIRs (files or models) node by node",
                    diffing.DESCRIPTION)
    diffing.add_arguments(diff)
    imported = _command(sub, "import", importing.run_import, [checking, simplifying, json_only],
                        "read an ONNX file into GraphIR and certify it against onnxruntime",
                        importing.DESCRIPTION)
    importing.add_arguments(imported)
    judged = _command(sub, "adjudicate", adjudicating.run_adjudicate, [json_only],
                      "judge a verifier's counterexample: exact, float32, the competition's "
                      "rule", adjudicating.DESCRIPTION)
    adjudicating.add_arguments(judged)
    margined = _command(sub, "margin", margining.run_margin, [json_only],
                        "bound float32 against exact over a property's region; tighten it",
                        margining.DESCRIPTION)
    margining.add_arguments(margined)
    suites.register(sub, json_only)
    report = _command(sub, "report", commands.run_report,
                      [target, checking, exporting, json_only],
                      "write one self-contained HTML report",
                      "Write one self-contained HTML file (no network, no JavaScript) with the "
                      "mapping table, the support-boundary reasons, the exactness results "
                      "with plots, and the arithmetic model. A rejected model still gets a "
                      "report. Plots need matplotlib: pip install 'ncet[report]'. With --export, "
                      "an ONNX export section too (exported in memory, as `ncet export` would "
                      "write it; the export options below apply only with --export). Exit "
                      "status 0 when the model converts and is exact (and, with --export, the "
                      "export passes every lint and check asked for), 1 otherwise.")
    report.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="where to write the report, e.g. report.html")
    report.add_argument("--export", action="store_true", help=(
        "add a section on the model exported to ONNX: profile, opset, nodes per ONNX op "
        "type, metadata_props, the lint findings per tool, and the check's verdict"))
    return parser


def _command(sub, name: str, run, parents, summary: str, description: str):
    lines = [f"  {line}" for line in COMMAND_EXAMPLES[name]]
    epilog = "examples:\n" + "\n".join(lines)
    if name not in ("demo", "show", "import", "adjudicate", "margin"):
        epilog += "\n\n" + textwrap.fill(FORMS_HELP, 88)
    command = sub.add_parser(name, parents=parents, help=summary,
                             description=textwrap.fill(description, 88), epilog=epilog,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    command.set_defaults(run=run, parser=command)
    return command


def _target_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("target", metavar="TARGET", help=(
        "the model: package.module:factory, path/to/file.py:factory, or a bundled example "
        "name (see `ncet demo --help`)"))
    options.add_argument("--input-shape", action="append", type=input_shape, default=[],
                         metavar="SHAPE", dest="input_shapes", help=(
                             "per-sample shape of one forward() argument, without the batch "
                             "axis, e.g. 3,32,32; repeat for several arguments (a bundled "
                             "example has its own)"))
    options.add_argument("--eval", action="store_true", help=(
        "call model.eval() before converting (otherwise the model keeps the mode its factory "
        "gave it, and training-mode BatchNorm or dropout is rejected)"))
    options.add_argument("--rewrite", action="store_true", help=(
        "apply the opt-in rewrite rules first: in-place forms become out-of-place where "
        "nothing reads the overwritten tensor afterwards, and x.view(x.size(0), -1) and its "
        "kin become static reshapes (docs/support-boundary.md, \"Opt-in rewrites\")"))
    options.add_argument("--stop-at", default=None, metavar="NODE", help=(
        "convert only up to NODE (an FX node name as the mapping table shows it, or a "
        "module path): the GraphIR returns that node's value, the rest is reported as cut"))
    options.add_argument("--cut-trailing", action="store_true", help=(
        "leave out the monotone activations that end every path to the output (Sigmoid, "
        "Tanh, Softmax, LogSoftmax), so that the GraphIR returns the logits (docs/ir.md, "
        "\"Cutting a model short\")"))
    return options


def _export_options(simplify: bool = False) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("ONNX export")
    group.add_argument("--profile", default=None, metavar="P", help=(
        "the export profile: canonical (the natural ONNX spelling of each op; the default) or "
        "verifier (the spelling verification tools read); see docs/export.md"))
    group.add_argument("--batch", type=_batch, default=None, metavar="N", help=(
        "a fixed batch size for the file's inputs and outputs (default: a symbolic batch "
        "axis N)"))
    group.add_argument("--opset", type=_opset, default=None, metavar="K", help=(
        "the ONNX opset of the default domain, 18 or later (default: the profile's, canonical "
        "21, verifier 18)"))
    group.add_argument("--lint", action="append", default=[], metavar="TOOL", help=(
        "list every node TOOL would reject or silently mis-handle: one of "
        f"{', '.join(LINT_TOOL_NAMES)}; repeat for several tools (--lint eran --lint "
        "marabou). Findings make the exit status 1 (the file is still written)"))
    group.add_argument("--check", action="store_true", help=(
        "certify the ONNX file in onnxruntime against the GraphIR, node by node, within the "
        "certified bounds (ncet.check_onnx; --samples, --seed, -q as for `ncet check`). A "
        "failed check makes the exit status 1 (the file is still written)"))
    if simplify:
        group.add_argument("--simplify", action="store_true", help=(
            "export ncet.simplify's graph instead (BatchNorm and the input normalisation "
            "folded, affine layers merged, identities dropped; docs/simplification.md), once "
            "its certificate holds: prints the changes and the certified bound; exit status "
            "1 and nothing written when it does not hold. --check then certifies the file "
            "against the simplified graph"))
    return options


LINT_TOOL_NAMES = ("abcrown", "marabou", "eran", "nnv")
"""The --lint tool ids, as `ncet.onnx.lint.LINT_TOOLS` has them (named here so that --help
does not import onnx; tests/test_cli_export.py holds the two equal)."""


def _check_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--samples", type=_positive, default=32, metavar="N", help=(
        "generated input samples per scale (three scales: 1e-6, 1, 1e4; default 32)"))
    options.add_argument("--seed", type=_seed, default=0, metavar="N",
                         help="seed of the generated inputs (default 0)")
    options.add_argument("-q", "--quiet", action="store_true",
                         help="no progress bar on stderr")
    return options



MAX_SAMPLE_ELEMENTS = 2 ** 31
"""The most elements one sample of an --input-shape may have (PyTorch's int32 index limit)."""


def _limit(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer, e.g. "
                                         "--max-check-bytes 8000000000")
    return int(text)


def _batch(text: str) -> int:
    if not text.isdigit() or int(text) == 0 or int(text) >= 2**63:
        raise argparse.ArgumentTypeError(f"{text!r} is not a batch size: give a positive "
                                         "integer below 2**63, e.g. --batch 1")
    return int(text)


def _opset(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an opset: give an integer, 18 or "
                                         "later, e.g. --opset 21")
    return int(text)


def _seed(text: str) -> int:
    if not text.isdigit() or int(text) >= 2**63:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seed: give an integer from 0 to "
                                         "2**63 - 1, e.g. --seed 0")
    return int(text)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer, e.g. --samples 8")
    if int(text) > MAX_SAMPLES:
        raise argparse.ArgumentTypeError(f"{text!r} samples per scale is more than the "
                                         f"{MAX_SAMPLES:,} the check can hold; give fewer, "
                                         "e.g. --samples 32")
    return int(text)
