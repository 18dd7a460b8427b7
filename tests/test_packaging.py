"""What the kit ships: a licence in the wheel and sdist, and an sdist that holds
the templates but nothing from a local environment or build."""

import subprocess
import sys
import tarfile
from importlib import metadata

from conftest import REPO


def test_installed_kit_declares_and_carries_its_licence():
    meta = metadata.metadata("jax-ladder")
    assert meta["License-Expression"] == "Apache-2.0"
    files = [str(f) for f in metadata.files("jax-ladder") or []]
    assert any(f.endswith("licenses/LICENSE") for f in files), files[:20]


def test_sdist_has_the_licence_and_templates_and_no_local_environment(tmp_path):
    build = "import sys; from scikit_build_core.build import build_sdist; build_sdist(sys.argv[1])"
    result = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = [name.split("/", 1)[1] for name in tar.getnames() if "/" in name]
    assert "LICENSE" in names
    assert any(n.startswith("templates/ffi/") for n in names)
    assert any(n.startswith("examples/ffi/csrc/") for n in names)
    leaked = [n for n in names if n.startswith((".venv", "build/")) or "/.venv/" in n]
    assert leaked == [], leaked[:10]
