{%- set seq = cookiecutter.symbolic_dims == "batch,seq" -%}
"""Command line: export the model to a file, or load a file and run it.

python -m {{ cookiecutter.package_name }} export --out model.jax
python -m {{ cookiecutter.package_name }} run model.jax --batch 8{% if seq %} --seq 20{% endif %}
python -m {{ cookiecutter.package_name }} run model.jax --inputs in.npz --save out.npz
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

# Relative to the project's root, where --golden runs: the golden artifact is
# the project's test data, not the package's, so an installed copy of the
# package writes and the tests read the checkout's tests/golden/.
GOLDEN = Path("tests", "golden", "model.jax")
# Arrays by name, as np.load reads an .npz.
Arrays: TypeAlias = dict[str, npt.NDArray[Any]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}")
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="export the model and write NAME and NAME.json")
    exp.add_argument("--out", type=Path, default=Path("artifacts/model.jax"))
    exp.add_argument(
        "--platforms", help="comma-separated, e.g. cpu,cuda,tpu (default: the project's PLATFORMS)"
    )
    exp.add_argument(
        "--golden",
        action="store_true",
        help="write the golden artifact, inputs and outputs under tests/golden/",
    )
    run = sub.add_parser("run", help="load an artifact in this process and call it")
    run.add_argument("artifact", type=Path)
    run.add_argument("--inputs", type=Path, help=".npz with arrays named like the inputs")
    run.add_argument("--batch", type=int, default=4, help="batch size of random inputs")
{%- if seq %}
    run.add_argument("--seq", type=int, default=16, help="sequence length of random inputs")
{%- endif %}
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--save", type=Path, help="write the outputs to this .npz")
    args = parser.parse_args(argv)
    try:
        return export_command(args) if args.command == "export" else run_command(args)
    except (ValueError, TypeError, FileNotFoundError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def export_command(args: argparse.Namespace) -> int:
    import jax.numpy as jnp

    from . import artifact
    from .{{ cookiecutter.op_name }} import exported_function

    platforms = tuple(args.platforms.split(",")) if args.platforms else artifact.PLATFORMS
    if args.golden and not Path("tests").is_dir():
        raise FileNotFoundError("--golden writes tests/golden/: run it in the project's root")
    out = GOLDEN if args.golden else args.out
    io_path = out.with_suffix(".io.npz")
    # What the golden held before, to say what the new one changes.
    previous: Arrays | None = None
    if args.golden and io_path.is_file():
        with np.load(io_path) as data:
            previous = {name: data[name] for name in data.files}
    exported = artifact.export_model(platforms=platforms)
    artifact.save(exported, out)
    print(f"wrote {out} ({out.stat().st_size} bytes) for {', '.join(platforms)}")
    if args.golden:
        inputs = artifact.random_inputs(artifact.load(out).metadata, batch=3{% if seq %}, seq=7{% endif %}, seed=1234)
        arrays = [jnp.asarray(a) for a in inputs.values()]
        outputs = exported_function()(*arrays)  # the plain-JAX model, not the artifact
        # Plain arrays only; naming allow_pickle also tells the type checker
        # that no key of inputs is savez's own allow_pickle argument.
        if previous is not None:
            print(golden_change(previous, inputs, np.asarray(outputs)))
        np.savez(io_path, allow_pickle=False, **inputs, output=np.asarray(outputs))
        print(f"wrote {io_path} (inputs and expected outputs)")
    return 0


def golden_change(previous: Arrays, inputs: Arrays, output: npt.NDArray[Any]) -> str:
    """What a new golden changes against the one it replaces: the inputs (drawn
    from the same seed, so they change only with the input signature) and the
    largest difference in the expected output."""
    old_inputs = {k: v for k, v in previous.items() if k != "output"}
    if {k: (v.shape, v.dtype) for k, v in old_inputs.items()} != {
        k: (v.shape, v.dtype) for k, v in inputs.items()
    }:
        return "the golden's inputs changed (another input signature): its output is not comparable"
    old = previous["output"]
    if old.shape != output.shape or old.dtype != output.dtype:
        return (
            f"the golden's output changed from {old.dtype}{list(old.shape)} "
            f"to {output.dtype}{list(output.shape)}"
        )
    difference = np.abs(output.astype(np.float64) - old.astype(np.float64))
    largest = float(np.nanmax(difference)) if difference.size else 0.0
    if largest == 0 and np.array_equal(np.isnan(output), np.isnan(old)):
        return "the golden's output is unchanged"
    return (
        f"the golden's output changed: largest difference {largest:.3g} against the previous golden"
    )


def run_command(args: argparse.Namespace) -> int:
    from . import artifact

    loaded = artifact.load(args.artifact)
    if args.inputs:
        with np.load(args.inputs) as data:
            inputs = {spec["name"]: data[spec["name"]] for spec in loaded.metadata["inputs"]}
    else:
        sizes = dict(batch=args.batch{% if seq %}, seq=args.seq{% endif %}, seed=args.seed)
        inputs = artifact.random_inputs(loaded.metadata, **sizes)
    output = np.asarray(loaded(*inputs.values()))
    print(f"output: shape {output.shape}, dtype {output.dtype}, mean {output.mean():.6g}")
    if args.save:
        np.savez(args.save, output=output)
        print(f"wrote {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
