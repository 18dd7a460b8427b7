"""Refuse a project or package name that would break the generated project.

The rule is templates/name_rules.py, which `jax-ladder new` applies too, so
plain cookiecutter and the kit accept the same names. cookiecutter runs this
hook as a rendered copy in a temporary file, from the new project's folder:
only cookiecutter._repo_dir (this template's folder) leads back to the rule.
"""

import os
import runpy
import sys
from pathlib import Path


def rules_file() -> Path:
    template = Path({{ cookiecutter._repo_dir | tojson }})
    # A template given as a relative path arrives relative to where cookiecutter
    # started, which a hook is not told: try the shell's working directory, then
    # the output folder (where cookiecutter started, unless -o was given).
    anchors = [os.environ.get("PWD", ""), {{ cookiecutter._output_dir | tojson }}]
    candidates = [Path(a, template) for a in anchors if a]
    if template.is_absolute():
        candidates = [template]
    for candidate in candidates:
        if (candidate.parent / "name_rules.py").is_file():
            return candidate.parent / "name_rules.py"
    sys.exit(
        f"error: no name_rules.py beside the template {str(template)!r}; run cookiecutter "
        "on a whole jax-ladder checkout, with an absolute path if it still fails"
    )


rules = runpy.run_path(str(rules_file()))
problem = rules["project_name_problem"]({{ cookiecutter.project_name | tojson }})
if problem:
    sys.exit(f"error: {problem}")
problem = rules["package_name_problem"]({{ cookiecutter.package_name | tojson }})
if problem:
    sys.exit(
        f"error: {problem}, so it is not a usable Python package name; "
        "choose another project_name or package_name"
    )
