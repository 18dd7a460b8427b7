"""`jax-ladder doctor`: versions, backends, tools, what each rung can do here."""

from __future__ import annotations

import json
from pathlib import Path

from jax_ladder import doctor, doctor_project
from jax_ladder.commands._common import Args, Subparsers


def add_parser(sub: Subparsers) -> None:
    doc = sub.add_parser(
        "doctor",
        help="versions, backends, tools, what each rung can do here, known problems",
        description="Exit status 1 only where the kit itself cannot work.",
    )
    doc.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: Args) -> int:
    report = doctor.assess(doctor.gather())
    # Run inside a generated project, the doctor also reports on it.
    root = doctor_project.find_project(Path.cwd())
    project = (
        None
        if root is None
        else doctor_project.assess_project(root, report.facts.packages.get("jax"))
    )
    if args.json:
        data = doctor.to_json(report)
        if project is not None:
            data["project"] = project if isinstance(project, str) else project.to_json()
        print(json.dumps(data, indent=2))
    else:
        text = doctor.render(report)
        if root is not None and project is not None:
            text += "\n\n" + "\n".join(doctor_project.render_project(project, root))
        print(text)
    return 0 if report.ok else 1
