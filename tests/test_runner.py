"""The runner tests what it just built, or refuses: never an installed copy."""

import os
import subprocess
import sys

from jax_ladder.rungs import by_name
from jax_ladder.runner import junit_results, run_project_tests
from jax_ladder.scaffold import scaffold

NAME = "shadow-probe-7f3a"  # unique: nothing else in the suite uses this package name


def pip(*args):
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_an_editable_same_named_project_is_refused_not_tested(tmp_path):
    """An editable scikit-build-core install (the FFI project's next steps)
    puts an import hook first on sys.meta_path, which beats PYTHONPATH: before
    the check, the runner silently tested that installed copy."""
    installed = scaffold(by_name("ffi"), tmp_path / "installed", {"project_name": NAME})
    fresh = scaffold(by_name("custom-vjp"), tmp_path / "fresh", {"project_name": NAME})
    pip("install", "--quiet", "--no-build-isolation", "--no-deps", "-e", str(installed))
    try:
        run = run_project_tests(fresh)
    finally:
        pip("uninstall", "--quiet", "--yes", NAME)
    assert not run.ok
    assert "refusing to test" in run.output, run.output[-3000:]
    assert "shadow_probe_7f3a" in run.output
    assert str(installed) in run.output
    # With the installed copy gone, the same project is tested as usual.
    assert run_project_tests(fresh, extra_args=("-k", "reference")).ok


def test_junit_results_count_and_give_each_skip_its_reason(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1">'
        '<testcase name="test_a"/>'
        '<testcase name="test_b"><failure message="boom"/></testcase>'
        '<testcase name="test_c"><skipped message="needs a TPU device"/></testcase>'
        "</testsuite></testsuites>"
    )
    counts, reasons = junit_results(junit)
    assert counts == {"passed": 1, "failed": 1, "skipped": 1}
    assert reasons == ["test_c: needs a TPU device"]
    # A module skipped while pytest collects it: its reason is in the text, not the message.
    junit.write_text(
        '<testsuites><testsuite tests="1" skipped="1"><testcase classname="" name="tests.test_x">'
        '<skipped message="collection skipped">(\'/p/tests/test_x.py\', 16, "Skipped: '
        "HiJAX's HiPrim needs JAX 0.11 or newer\")</skipped></testcase></testsuite></testsuites>"
    )
    assert junit_results(junit)[1] == ["tests.test_x: HiJAX's HiPrim needs JAX 0.11 or newer"]
    assert junit_results(tmp_path / "missing.xml") == ({"passed": 0, "failed": 0, "skipped": 0}, [])


# What an editable install looks like once its folder is deleted: its import
# hook, first on sys.meta_path, raises instead of finding the package.
STALE_EDITABLE_HOOK = f"""
import sys

class StaleEditableFinder:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {NAME.replace("-", "_")!r}:
            raise FileNotFoundError("No such file or directory: '/deleted/src/__init__.py'")
        return None

sys.meta_path.insert(0, StaleEditableFinder())
"""


def test_an_installed_copy_whose_folder_is_gone_is_refused_not_a_traceback(tmp_path):
    """The refusal for a same-named installed project, with the uninstall
    command, also where that copy's folder was deleted (its hook then raises)."""
    fresh = scaffold(by_name("custom-vjp"), tmp_path / "fresh", {"project_name": NAME})
    hook = tmp_path / "site" / "sitecustomize.py"
    hook.parent.mkdir()
    hook.write_text(STALE_EDITABLE_HOOK)
    run = run_project_tests(fresh, env=dict(os.environ, PYTHONPATH=str(hook.parent)))
    assert not run.ok
    assert "refusing to test" in run.output, run.output[-3000:]
    assert f"python -m pip uninstall {NAME}" in run.output
    assert f"an import hook ({hook}) failing: FileNotFoundError" in run.output
    assert "Traceback" not in run.output
