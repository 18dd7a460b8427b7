"""What the examples whose XLA FFI handlers are CPU-only share (examples/ffi and the ladder's
FFI rung): loading their compiled module, and an identity primitive that refuses, in words,
to lower a call for any other platform before XLA meets a custom call it has no handler for.
"""

import importlib
import importlib.machinery
import importlib.util

import jax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

__all__ = ["cpu_only_primitive", "load_extension"]


def load_extension(example, extension, package):
    """The compiled module `extension` of the example in folder `example`: its standalone
    build (`example`/build) first, then the copy the kit installs in `package`.

    The standalone build comes first so that a developer's fresh build wins over an older
    installed one. It is loaded from its file, so the build folder never goes on sys.path.
    """
    build_dir = example / "build"
    spec = importlib.machinery.PathFinder.find_spec(extension, [str(build_dir)])
    if spec is not None:
        try:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except ImportError as err:  # e.g. built against another jaxlib or Python
            raise ImportError(
                f"{spec.origin} failed to load ({err}); rebuild it, or delete "
                f"{build_dir} to use the kit's installed copy"
            ) from err
        return module
    installed = f"{package}.{extension}"
    try:
        return importlib.import_module(installed)
    except ImportError as err:
        folder = f"examples/{example.name}"
        raise ImportError(
            f"the compiled extension {extension} was found neither in {build_dir} nor as "
            f"{installed}. Build it either standalone, from the kit's root:\n"
            f"    cmake -S {folder} -B {folder}/build -DPython_EXECUTABLE=$(which python)\n"
            f"    cmake --build {folder}/build\n"
            "or by installing the kit with its FFI examples switched on, as scripts/test "
            "does (a plain `pip install .` compiles nothing): with scikit-build-core, "
            "nanobind and jax installed first,\n"
            "    pip install . --no-build-isolation "
            "-Ccmake.define.JAX_LADDER_BUILD_FFI_EXAMPLE=ON -Cwheel.platlib=true\n"
            f"see {folder}/README.md\n(import of {installed} said: {err})"
        ) from err


def cpu_only_primitive(name, refusal):
    """An identity on its operands whose only lowering is the CPU's (where it emits nothing):
    bind it to a call's operands, and lowering the call for another platform raises
    NotImplementedError(refusal.format(platforms=...)). An identity is linear and commutes
    with vmap, so its JVP and batching rules pass everything through."""
    cpu_only = Primitive(name)
    cpu_only.multiple_results = True
    cpu_only.def_abstract_eval(lambda *avals: avals)
    # Eagerly too, the platform is that of the device the call runs on: compile the identity.
    cpu_only.def_impl(lambda *operands: jax.jit(cpu_only.bind)(*operands))
    batching.primitive_batchers[cpu_only] = lambda ops, dims: (cpu_only.bind(*ops), dims)
    ad.primitive_jvps[cpu_only] = lambda primals, tangents: (cpu_only.bind(*primals), tangents)
    mlir.register_lowering(cpu_only, lambda ctx, *operands: operands, platform="cpu")

    def refuse(ctx, *operands):
        others = ", ".join(p for p in ctx.module_context.platforms if p != "cpu")
        raise NotImplementedError(refusal.format(platforms=others))

    mlir.register_lowering(cpu_only, refuse)  # every platform but the CPU
    return cpu_only
