"""Template options: read from each template's cookiecutter.json and validated
here, before cookiecutter runs, so a bad input never leaves files behind."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from cookiecutter.environment import StrictEnvironment

from jax_ladder.rungs import _data_dir

TRUE, FALSE = {"true", "yes", "y", "1", "on"}, {"false", "no", "n", "0", "off"}


# Options that change only a generated project's repository files (its licence,
# its CI), never its code: the kit bakes each of their values once, with the
# other options at their defaults, instead of crossing them with every code
# option (which would multiply the bakes that run the project's tests).
REPOSITORY_OPTIONS = frozenset(
    {"license", "copyright_holder", "copyright_year", "url", "accelerator_ci"}
)


class UsageError(Exception):
    """A problem with the user's input; the message names it and the fix."""


@dataclass(frozen=True)
class Option:
    key: str
    default: object  # str, bool, or the first choice
    choices: tuple[str, ...] = ()
    derived: bool = False  # default is a Jinja expression of other options
    prompt: str = ""  # the question, from cookiecutter.json's __prompts__

    @property
    def kind(self) -> str:
        if self.choices:
            return "choice"
        return "bool" if isinstance(self.default, bool) else "str"

    def describe(self) -> str:
        if self.choices:
            return f"{self.key} (one of {', '.join(self.choices)}; default {self.choices[0]})"
        if self.derived:
            return f"{self.key} (default derived from the other options)"
        return f"{self.key} (default {self.default!r})"


def load_options(template: Path) -> dict[str, Option]:
    raw = json.loads((template / "cookiecutter.json").read_text())
    prompts = raw.get("__prompts__", {})
    options = {}
    for key, value in raw.items():
        if key.startswith("_"):
            continue
        prompt = prompts.get(key, key)
        if isinstance(value, list):
            options[key] = Option(key, value[0], tuple(str(v) for v in value), prompt=prompt)
        else:
            # A Jinja expression ({{ }}) or tag ({% now %}) of other options.
            derived = isinstance(value, str) and ("{{" in value or "{%" in value)
            options[key] = Option(key, value, derived=derived, prompt=prompt)
    return options


def check_choice(key: str, text: str, choices: tuple[str, ...]) -> str:
    """text if it is one of choices, else a UsageError naming them."""
    if text not in choices:
        raise UsageError(f"{key}={text!r} is not allowed; use one of: {', '.join(choices)}")
    return text


def split_assignment(item: str, flag: str) -> tuple[str, str]:
    """ "KEY=VALUE" given to `flag` as (KEY, VALUE), or a UsageError."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise UsageError(f"{flag} expects KEY=VALUE, got {item!r}")
    return key, value


def parse_value(option: Option, text: str) -> object:
    """Convert one user-given string to the option's type, or raise UsageError."""
    if option.kind == "choice":
        return check_choice(option.key, text, option.choices)
    if option.kind == "bool":
        if text.lower() in TRUE:
            return True
        if text.lower() in FALSE:
            return False
        raise UsageError(f"{option.key}={text!r} is not a boolean; use true or false")
    if option.key == "project_name":
        check_project_name(text)
    elif option.key == "package_name":
        check_package_name(text)
    return text


def parse_assignments(options: dict[str, Option], assignments: list[str]) -> dict[str, object]:
    """Turn ["KEY=VALUE", ...] into a validated dict."""
    values: dict[str, object] = {}
    for item in assignments:
        key, text = split_assignment(item, "--set")
        if key not in options:
            known = ", ".join(options)
            raise UsageError(f"unknown option {key!r}; this template's options are: {known}")
        values[key] = parse_value(options[key], text)
    return values


def resolve(options: dict[str, Option], given: dict[str, object]) -> dict[str, object]:
    """Fill in defaults (rendering derived ones like cookiecutter does) and check names."""
    context: dict[str, object] = {}
    env = StrictEnvironment()
    for key, option in options.items():
        if key in given:
            context[key] = given[key]
        elif option.derived:
            context[key] = env.from_string(str(option.default)).render(cookiecutter=context)
        else:
            context[key] = option.default
    if "project_name" in context:
        check_project_name(str(context["project_name"]))
    if "package_name" in context:
        check_package_name(str(context["package_name"]))
    if "op_name" in context:
        check_op_name(str(context["op_name"]))
    return context


@cache
def name_rules() -> ModuleType:
    """templates/name_rules.py: the name rule, which the templates' pre-gen hooks
    apply too. It sits beside the templates so that plain cookiecutter users have
    it; read on first use, so a kit missing its templates still starts (and
    `doctor` can say so)."""
    path = _data_dir("templates") / "name_rules.py"
    spec = importlib.util.spec_from_file_location("jax_ladder._name_rules", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{path} is missing; reinstall jax-ladder")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def __getattr__(name: str) -> object:
    # The rule's constants, for callers that knew them as options.MAX_NAME_LENGTH.
    if name in ("MAX_NAME_LENGTH", "SHADOWED"):
        return getattr(name_rules(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_project_name(name: str) -> None:
    problem = name_rules().project_name_problem(name)
    if problem:
        raise UsageError(problem)


def check_package_name(name: str) -> None:
    problem = name_rules().package_name_problem(name)
    if problem:
        raise UsageError(f"{problem}; pick another name with --name or --set package_name=NAME")


def check_op_name(name: str) -> None:
    problem = name_rules().op_name_problem(name)
    if problem:
        raise UsageError(f"{problem}; pick another with --set op_name=NAME")
