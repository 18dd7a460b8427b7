"""A declaration checked when it is made (issue 60, items 2 and 3): each
mistake in an OpSpec (or its Args, Refuses, Collectives) raises a one-line
DeclarationError that names the field and the fix; the reference's and the
oracle's results are held to `outputs=` before any cell; and the short form,
signature="x[b,n], w[n] -> [b,n]", with "..." for any leading axes."""

import math
import re

import jax.numpy as jnp
import numpy as np
import pytest

from jax_ladder.opcheck import (
    Arg,
    Collectives,
    DeclarationError,
    OpSpec,
    Refuse,
    Ulps,
    cell_names,
    check,
    check_declaration,
)
from jax_ladder.opcheck.conformance import (
    LEADING_RANKS,
    expand_leading,
    make_args,
    parse_signature,
    run_cell,
)

EXACT = Ulps(4)


def scale(x, w):
    return x * w


def scale_oracle(x, w):
    return x * w


def spec(**changes):
    """A right declaration (x[b,n] * w[n]), with `changes`."""
    fields = {
        "name": "scale",
        "op": scale,
        "reference": scale,
        "oracle": scale_oracle,
        "args": (Arg("x", ("b", "n")), Arg("w", ("n",))),
        "outputs": (("b", "n"),),
        "sizes": {"b": 4, "n": 8},
        "tolerance": EXACT,
        "gradient_tolerance": EXACT,
        "batch_axes": ("b",),
        "shard_map_axes": ("b",),
    }
    return OpSpec(**{**fields, **changes})


def one_line(error: pytest.ExceptionInfo, *parts: str) -> str:
    """The error's message: one line, holding each of parts."""
    message = str(error.value)
    assert "\n" not in message, message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


def test_the_right_declaration_is_taken():
    assert [a.name for a in spec().args] == ["x", "w"]


# (changes to the right declaration, what its message must say: the field and the fix)
MISTAKES = {
    "axis without a size": (
        {"args": (Arg("x", ("b", "m")), Arg("w", ("n",)))},
        ["sizes has no size for axis 'm' (used by arg 'x'); add sizes={..., 'm': 8}"],
    ),
    "output axis without a size": (
        {"outputs": (("b", "k"),)},
        ["sizes has no size for axis 'k' (used by output 0)", "'k': 8"],
    ),
    "tolerance not an Ulps": (
        {"tolerance": 4.0},
        ["tolerance=4.0 is not an Ulps", "tolerance=Ulps(4)"],
    ),
    "gradient tolerance missing": (
        {"gradient_tolerance": None},
        ["gradient_tolerance is missing", "gradient_tolerance=Ulps(4)"],
    ),
    "negative ulps": ({"tolerance": Ulps(-1)}, ["tolerance.at_value", ">= 0"]),
    "op not callable": ({"op": "scale"}, ["op must be a function"]),
    "reference not callable": ({"reference": None}, ["reference must be a function"]),
    "oracle not callable": ({"oracle": np.zeros(3)}, ["oracle must be a function"]),
    "two args named alike": (
        {"args": (Arg("x", ("b", "n")), Arg("x", ("n",)))},
        ["two args are named 'x'", "its own name"],
    ),
    "args not a tuple": (
        {"args": Arg("x", ("b", "n"))},
        ["args must be a tuple of Arg", "(the comma)"],
    ),
    "args holding a tuple": (
        {"args": (("x", ("b", "n")),)},
        ["args[0]", "not an Arg", "Arg('x', ('b', 'n'))"],
    ),
    "outputs a bare axis tuple": (
        {"outputs": ("b", "n")},
        ["outputs must be a tuple of axis-name tuples", "outputs=(('b', 'n'),)"],
    ),
    "outputs empty": ({"outputs": ()}, ["outputs must be a non-empty tuple"]),
    "batch axis unknown": (
        {"batch_axes": ("q",)},
        ["batch_axes names the axis 'q'", "the named axes are ('b', 'n')"],
    ),
    "batch axes a string": (
        {"batch_axes": "b"},
        ["batch_axes must be a tuple of axis names", "batch_axes=('b',)"],
    ),
    "shard_map axis unknown": (
        {"shard_map_axes": ("m",)},
        ["shard_map_axes names the axis 'm'"],
    ),
    "symbolic axis unknown": (
        {"symbolic_axis": "B"},
        ["symbolic_axis 'B' is no argument's axis", "('b', 'n')"],
    ),
    "dtype not floating": (
        {"dtype": "int32"},
        ["dtype 'int32' is not a floating dtype name", "dtype='float32'"],
    ),
    "dtype unknown": ({"dtype": "float33"}, ["dtype 'float33'", "dtype='float32'"]),
    "dtypes a string": ({"dtypes": "bfloat16"}, ["dtypes must be a tuple", "('float32',"]),
    "dtypes holding no dtype": (
        {"dtypes": ("float32", "bf16")},
        ["dtypes holds 'bf16'", "('float32', 'bfloat16')"],
    ),
    "refusal of no cell": (
        {"refuse": {"vmap-only-y": Refuse(TypeError, "", "why")}},
        ["refuse names no cell: 'vmap-only-y'; did you mean 'vmap-only-x'"],
    ),
    "refusal not a Refuse": (
        {"refuse": {"jvp": (TypeError, "", "why")}},
        ["refuse['jvp'] is tuple, not a Refuse", "Refuse(error, match, why)"],
    ),
    "ill-conditioned cell of no cell": (
        {"ill_conditioned": {"size-m-1": "why"}},
        ["ill_conditioned names no cell: 'size-m-1'; did you mean", "'size-n-1'"],
    ),
    "extra collectives of no cell": (
        {"extra_collectives": {"jit-auto-q": Collectives("why", gradient={"all-gather": 1})}},
        ["extra_collectives names no cell: 'jit-auto-q'; did you mean"],
    ),
    "sizes not positive": ({"sizes": {"b": 4, "n": 0}}, ["sizes['n'] must be a positive int"]),
    "sizes not ints": ({"sizes": {"b": 4, "n": 2.5}}, ["sizes['n'] must be a positive int"]),
    "leading sizes not a tuple": (
        {"sizes": {"b": 4, "n": 8, "...": 3}},
        ["sizes['...'] must be a tuple of positive ints", "'...': (3,)"],
    ),
    "differentiable outputs out of range": (
        {"differentiable_outputs": (1,)},
        ["differentiable_outputs must be a tuple of output indices below 1"],
    ),
    "matmul inputs unknown": (
        {"matmul_inputs": {"tpu": "bf16"}},
        ["matmul_inputs['tpu'] is 'bf16'", "'bfloat16'"],
    ),
    "signature and args": (
        {"signature": "x[b,n], w[n] -> [b,n]"},
        ["give signature= or args= and outputs=, not both"],
    ),
    "arg_options without signature": (
        {"arg_options": {"x": {"domain": (0, 1)}}},
        ["arg_options goes with signature=", "Arg('x', ('n',), domain="],
    ),
    "arg_options of no argument": (
        {"args": (), "outputs": (), "signature": "x[b,n], w[n] -> [b,n]", "arg_options": {"v": {}}},
        ["arg_options names no argument: 'v'; the arguments are ['x', 'w']"],
    ),
    "arg_options of no option": (
        {
            "args": (),
            "outputs": (),
            "signature": "x[b,n], w[n] -> [b,n]",
            "arg_options": {"w": {"domains": (0, 1)}},
        },
        ["arg_options['w'] has 'domains', not an Arg option; did you mean 'domain'?"],
    ),
    "signature's dtype and arg_options'": (
        {
            "args": (),
            "outputs": (),
            "signature": "x[b,n], w[n]:float64 -> [b,n]",
            "arg_options": {"w": {"dtype": "float64"}},
        },
        ["argument 'w' has a dtype in signature= (float64) and in arg_options"],
    ),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_mistake_in_an_opspec_is_one_line_naming_the_field_and_the_fix(mistake):
    changes, parts = MISTAKES[mistake]
    with pytest.raises(DeclarationError) as error:
        spec(**changes)
    message = one_line(error, *parts)
    assert message.startswith(("OpSpec 'scale': ", "signature ")), message


# (a declaration's part, made wrong, and what its message must say)
PART_MISTAKES = {
    "domain reversed": (
        lambda: Arg("x", ("n",), domain=(1.0, 0.0)),
        ["Arg 'x': domain must be (lo, hi) with lo <= hi", "domain=(0.0, math.inf)"],
    ),
    "domain one number": (lambda: Arg("x", ("n",), domain=0.0), ["Arg 'x': domain"]),
    "axes a string": (
        lambda: Arg("x", "n"),
        ["Arg 'x': axes must be a tuple of axis names", "('b', 'n')"],
    ),
    "leading axes not first": (
        lambda: Arg("x", ("n", "...")),
        ["Arg 'x': axes ('n', '...') has '...' at position 1", "only come first"],
    ),
    "axis name not an identifier": (
        lambda: Arg("x", ("b-n",)),
        ["Arg 'x': axes ('b-n',) has the axis name 'b-n'", "identifiers"],
    ),
    "integer argument differentiated": (
        lambda: Arg("idx", ("n",), dtype="int32"),
        ["Arg 'idx': dtype 'int32' is not floating", "add differentiable=False"],
    ),
    "dtype unknown": (lambda: Arg("x", ("n",), dtype="f32"), ["Arg 'x': dtype 'f32'"]),
    "integer argument without its values": (
        lambda: Arg("idx", ("n",), differentiable=False, dtype="int32"),
        ["Arg 'idx': an int32 argument needs the values it takes", "range=(0, 'n')"],
    ),
    "range on a floating argument": (
        lambda: Arg("x", ("n",), range=(0, 4)),
        ["Arg 'x': range is for integer arguments", "domain="],
    ),
    "range not two bounds": (
        lambda: Arg("i", ("n",), differentiable=False, dtype="int32", range=(0, "n*2")),
        ["Arg 'i': range must be (low, high), half-open", "'n+1'"],
    ),
    "smallest negative": (lambda: Arg("x", ("n",), smallest=-1.0), ["Arg 'x': smallest"]),
    "sample not callable": (lambda: Arg("x", ("n",), sample=3), ["Arg 'x': sample must be"]),
    "refusal's error no class nor name": (
        lambda: Refuse("not a name", "", "why"),
        ["Refuse: error must be an exception class", "Refuse(TypeError"],
    ),
    "refusal's match no regex": (
        lambda: Refuse(TypeError, "f(x", "why"),
        ["Refuse: match 'f(x' is not a regular expression", "re.escape"],
    ),
    "refusal without why": (lambda: Refuse(TypeError, "", ""), ["Refuse: why must say"]),
    "no collective": (
        lambda: Collectives("why", forward={"all-gathers": 1}),
        ["Collectives: forward names 'all-gathers', not a collective; did you mean 'all-gather'?"],
    ),
    "no program": (lambda: Collectives("why"), ["Collectives: declare a program"]),
    "count negative": (
        lambda: Collectives("why", gradient={"all-reduce": -1}),
        ["Collectives: gradient['all-reduce'] must be a count"],
    ),
}


@pytest.mark.parametrize("mistake", PART_MISTAKES)
def test_a_mistake_in_an_arg_refuse_or_collectives_is_one_line(mistake):
    make, parts = PART_MISTAKES[mistake]
    with pytest.raises(DeclarationError) as error:
        make()
    one_line(error, *parts)


def test_a_declaration_error_is_a_value_error_and_exported():
    assert issubclass(DeclarationError, ValueError)
    import jax_ladder.opcheck as opcheck

    assert {"DeclarationError", "check_declaration"} <= set(opcheck.__all__)


def test_lists_given_for_tuples_are_taken_as_tuples():
    made = spec(args=[Arg("x", ["b", "n"]), Arg("w", ["n"])], outputs=[["b", "n"]])
    assert made == spec()


# --- The signature ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("signature", "args", "outputs"),
    [
        ("x[b,n], w[n] -> [b,n]", [("x", ("b", "n"), None), ("w", ("n",), None)], [("b", "n")]),
        ("  x [ b , n ]->[b,n]  ", [("x", ("b", "n"), None)], [("b", "n")]),
        ("x[] -> []", [("x", (), None)], [()]),
        ("x[...,n] -> y[...,n]", [("x", ("...", "n"), None)], [("...", "n")]),
        (
            "idx[b]:int32[0,n), x[b,n] -> values[b], [n]",
            [("idx", ("b",), "int32"), ("x", ("b", "n"), None)],
            [("b",), ("n",)],
        ),
    ],
)
def test_a_signature_parses(signature, args, outputs):
    parsed = parse_signature(signature)
    assert list(parsed.args) == args
    assert [axes for _, axes in parsed.outputs] == outputs


@pytest.mark.parametrize(
    ("text", "stored"),
    [("[0,n)", (0, "n")), ("[0,n]", (0, "n+1")), ("[-1,n-1]", (-1, "n")), ("[2,7)", (2, 7))],
)
def test_an_integer_range_is_stored_half_open(text, stored):
    assert parse_signature(f"x[b], i[b]:int32{text} -> [b]").ranges == {"i": stored}


def test_a_range_must_name_an_axis_with_a_size():
    with pytest.raises(DeclarationError) as error:
        spec(args=(), outputs=(), signature="x[b,n], i[b]:int32[0,k) -> [b,n]")
    one_line(error, "arg 'i''s range names 'k', which is no axis with a size")


@pytest.mark.parametrize(
    ("signature", "message"),
    [
        ("x[b,n -> [b]", "signature 'x[b,n -> [b]': expected ']' at column 7, found '->'"),
        ("x[b,n] [b]", "expected ',' or '->' at column 8, found '['"),
        ("x[b,n] ->", "expected '[' (an output's axes: [b,n], or [] for a scalar) at column 10"),
        ("x[n,...] -> [n]", "'...' may only be the first axis at column 5"),
        ("x[n], x[n] -> [n]", "argument 'x' named twice at column 7"),
        ("x[n] -> [n] y", "expected ',' or the end at column 13, found 'y'"),
        ("x[n$] -> [n]", "unexpected '$' at column 4"),
        ("x[b,] -> [b]", "expected an axis name or '...' at column 5, found ']'"),
        ("-> [b]", "expected an argument name at column 1, found '->'"),
        ("x[b]:[n] -> [b]", "expected a dtype name (int32, bool, ...) at column 6"),
        ("i[b]:int32[3,2) -> [b]", "the range [3,2) is empty at column 14"),
        ("i[b]:int32[0,n} -> [b]", "unexpected '}' at column 15"),
        ("i[b]:int32[0,n+] -> [b]", "expected an integer at column 16, found ']'"),
    ],
)
def test_a_wrong_signature_says_where(signature, message):
    with pytest.raises(DeclarationError) as error:
        parse_signature(signature)
    one_line(error, message)


def test_a_wrong_signature_in_an_opspec_says_where():
    with pytest.raises(DeclarationError) as error:
        spec(args=(), outputs=(), signature="x[b,n, w[n] -> [b,n]")
    one_line(error, "signature 'x[b,n, w[n] -> [b,n]': expected ']' at column 9, found '['")


def test_the_short_form_is_the_long_form():
    assert spec(args=(), outputs=(), signature="x[b,n], w[n] -> [b,n]") == spec()
    domain = (0.0, math.inf)
    short = spec(
        args=(),
        outputs=(),
        signature="x[b,n], w[n], idx[b]:int32[0,n) -> out[b,n]",
        arg_options={"w": {"domain": domain, "smallest": 1e-3}},
        op=lambda x, w, idx: x * w,
        reference=lambda x, w, idx: x * w,
        oracle=lambda x, w, idx: x * w,
    )
    assert short.args == (
        Arg("x", ("b", "n")),
        Arg("w", ("n",), domain=domain, smallest=1e-3),
        Arg("idx", ("b",), differentiable=False, dtype="int32", range=(0, "n")),
    )
    assert short.outputs == (("b", "n"),)
    # A floating dtype stays differentiable; arg_options may still say otherwise.
    half = spec(args=(), outputs=(), signature="x[b,n]:bfloat16, w[n] -> [b,n]")
    assert half.args[0] == Arg("x", ("b", "n"), dtype="bfloat16")


# --- "...": any leading axes -------------------------------------------------------------
def leading_spec(op, **changes):
    return OpSpec(
        **{
            "name": "softplus",
            "op": op,
            "reference": lambda x: jnp.logaddexp(x, 0.0),
            "oracle": lambda x: np.logaddexp(x, 0.0),
            "signature": "x[...,n] -> [...,n]",
            "sizes": {"n": 8},
            "tolerance": EXACT,
            "gradient_tolerance": EXACT,
            "batch_axes": ("n",),
            "shard_map_axes": ("n",),
            **changes,
        }
    )


def test_leading_axes_are_drawn_and_named_in_no_cell():
    made = leading_spec(jnp.sin, sizes={"n": 8, "...": (2, 3)})
    assert made.args == (Arg("x", ("...", "n")),)
    assert made.outputs == (("...", "n"),)
    assert made.axes == ("n",)  # the named ones
    names = cell_names(made)
    assert [n for n in names if n.startswith("size-")] == [
        "size-n-0",
        "size-n-1",
        "size-n-ragged",
        "size-n-large",
        *(f"size-...-{r}" for r in LEADING_RANKS),
    ]
    assert not [n for n in names if "..." in n and not n.startswith("size-...-")]
    (x,) = make_args(made, np.random.default_rng(0))
    assert x.shape == (2, 3, 8)
    expanded = expand_leading(made)
    assert expanded.args[0].axes == ("...0", "...1", "n")
    assert expanded.outputs == (("...0", "...1", "n"),)
    assert expanded.axes == ("n",)
    (x,) = make_args(leading_spec(jnp.sin), np.random.default_rng(0))
    assert x.shape == (3, 8)  # the default: one leading axis of 3


def softplus(x):
    return jnp.logaddexp(x, 0.0)


def softplus_of_rank_two(x):
    """Right only where x has one leading axis: what the declared sizes draw."""
    return softplus(x) if x.ndim == 2 else 2 * softplus(x)


CELLS = "eager,jit,vmap-*,size-*"


def test_an_elementwise_op_with_leading_axes_passes():
    report = check(leading_spec(softplus), cells=CELLS)
    assert not report.failed, str(report)
    assert report["size-...-2"].outcome == "passed"


def test_an_op_right_at_one_rank_only_fails_the_leading_size_cells():
    report = check(leading_spec(softplus_of_rank_two), cells=CELLS)
    failed = {r.cell for r in report.failed}
    # (and vmap-axis-n, where the op sees the leading axes alone)
    assert {f"size-...-{r}" for r in LEADING_RANKS} <= failed, str(report)
    assert {"eager", "jit", "vmap-new-axis"}.isdisjoint(failed), str(report)
    assert "leading axes (2, 3)" in report["size-...-2"].message


def test_the_leading_axes_go_on_every_argument_that_has_them():
    made = OpSpec(
        name="scale_rows",
        op=scale,
        reference=scale,
        oracle=scale_oracle,
        signature="x[...,n], w[n] -> [...,n]",
        sizes={"n": 8, "...": (2,)},
        tolerance=EXACT,
        gradient_tolerance=EXACT,
    )
    report = check(made, cells="eager,vmap-only-w,vmap-mixed,size-...-*,jit-auto-n")
    assert not report.failed, str(report)


def test_an_output_cannot_have_leading_axes_no_argument_has():
    with pytest.raises(DeclarationError) as error:
        spec(outputs=(("...", "n"),))
    one_line(error, "outputs[0] ('...', 'n') starts with '...', but no argument does")


# --- The results against outputs=, before any cell ------------------------------------------
def test_an_oracle_of_the_wrong_shape_is_named_before_any_cell():
    wrong = spec(oracle=lambda x, w: (x * w).sum(-1))
    with pytest.raises(DeclarationError) as error:
        check(wrong, cells="eager")
    one_line(
        error,
        "OpSpec 'scale': the oracle returned shape (4,) for output 0; "
        "outputs= declares ('b', 'n') = (4, 8)",
    )
    # run_cell checks the same first, in every cell (a refused one too).
    refused = spec(oracle=wrong.oracle, refuse={"jvp": Refuse(Exception, "", "why")})
    with pytest.raises(DeclarationError, match="the oracle returned shape"):
        run_cell(refused, "jvp", np.random.default_rng(0))


def test_outputs_declared_otherwise_than_the_reference_are_named():
    with pytest.raises(DeclarationError) as error:
        check_declaration(spec(outputs=(("b", "n"), ("n",))))
    one_line(
        error,
        "the reference returned 1 output(s) of shapes [(4, 8)]; outputs= declares 2",
    )
    transposed = spec(outputs=(("n", "b"),), oracle=None)
    with pytest.raises(DeclarationError) as error:
        check_declaration(transposed)
    message = one_line(error, "the reference returned shape (4, 8) for output 0")
    assert re.search(r"declares \('n', 'b'\) = \(8, 4\)$", message)


def test_the_right_declaration_passes_its_check():
    check_declaration(spec())
    check_declaration(leading_spec(softplus))
