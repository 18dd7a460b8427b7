"""Which project and package names a template accepts: the one copy of the rule.

Every template's hooks/pre_gen_project.py applies it (for plain cookiecutter
users) and `jax-ladder new` applies it before rendering anything
(jax_ladder.options), so the two accept and refuse the same names. It lives
here, beside the templates, because a plain cookiecutter user has the
templates but not the kit; hence the standard library only. Each function
returns why a name is unusable, or None.
"""

from __future__ import annotations

import keyword
import re
import sys
import unicodedata

# Generated code imports the package by name on lines that must stay within
# the projects' 100-column lint limit.
MAX_NAME_LENGTH = 32
# Package names that would shadow something the generated project imports
# (the standard library is checked separately).
SHADOWED = frozenset(
    {"jax", "jaxlib", "numpy", "pytest", "ml_dtypes", "opt_einsum", "scipy", "tests"}
)
# Module names a generated project's machinery already uses, beside the op's
# own module (src/<package>/<op_name>.py) and tests (tests/test_<op_name>.py).
MACHINERY_MODULES = frozenset(
    {
        "reference", "hlo", "tune", "block_table", "partitioning", "artifact",
        "ffi_target", "kernel", "conformance", "oracle", "compare", "op_spec",
        "conftest", "support_table", "multiprocess_worker", "bench", "sharded_step",
        "rowwise", "plot", "devices", "composition", "backend", "target", "timing",
    }
)  # fmt: skip
# An op name is a module, a function and (upper-cased) a C++ macro prefix.
OP_NAME = re.compile(r"[a-z][a-z0-9_]*")
# The project folder and distribution name.
PROJECT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def project_name_problem(name: str) -> str | None:
    if len(name) > MAX_NAME_LENGTH:
        length = len(name)
        return f"project name {name!r} is {length} characters long; use at most {MAX_NAME_LENGTH}"
    if not PROJECT_NAME.fullmatch(name):
        return (
            f"project name {name!r} is invalid; use letters, digits, '-' or '_', "
            "starting with a letter (e.g. my-op)"
        )
    return None


def package_name_problem(name: str) -> str | None:
    if not name.isidentifier():
        return f"package name {name!r} is not a Python identifier"
    if len(name) > MAX_NAME_LENGTH:
        return f"package name {name!r} is longer than {MAX_NAME_LENGTH} characters"
    # Python reads identifiers in NFKC form: `import ｊａｘ` imports jax and
    # never finds a folder named ｊａｘ.
    imported_as = unicodedata.normalize("NFKC", name)
    if imported_as != name:
        return f"package name {name!r} is imported as {imported_as!r}"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"package name {name!r} is a Python keyword"
    if name in SHADOWED or name in sys.stdlib_module_names:
        return f"package name {name!r} would shadow the module {name!r}"
    return None


def op_name_problem(name: str) -> str | None:
    if len(name) > MAX_NAME_LENGTH:
        return f"op name {name!r} is longer than {MAX_NAME_LENGTH} characters"
    if not OP_NAME.fullmatch(name) or name.endswith("_"):
        return (
            f"op name {name!r} is invalid; use lower-case letters, digits and '_', "
            "starting with a letter (e.g. softmax)"
        )
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        return f"op name {name!r} is a Python keyword"
    if name in MACHINERY_MODULES or name.startswith("test"):
        return f"op name {name!r} is a module the generated project already has"
    if name in SHADOWED or name in sys.stdlib_module_names:
        return f"op name {name!r} would shadow the module {name!r}"
    return None
