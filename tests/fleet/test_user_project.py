"""The worker recipe in a user's own project (issue 34, items 1 and 2): a project directory with its
graphs in ``myapp/graphs.py`` and a ``workers`` package of its own, a worker started from there by the
installed console scripts with no PYTHONPATH, and the wheel, which installs ``reflexr_graph`` alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from reflexr_graph import local_processes
from reflexr_graph.client import Client
from reflexr_graph.config.settings import load_settings
from reflexr_graph.model import Status
from tests import subprocesses
from tests.waiting import wait_for

BIN = Path(sys.executable).parent
"""The venv's console scripts, as a user's shell finds them (their sys.path starts with this bin
directory, not with the working directory, unlike ``python -m``)."""
ROOT = subprocesses.ROOT
UV = ROOT / ".tools" / "bin" / "uv"
"""The pinned uv the Makefile installs; it builds the wheel as a release would."""

GRAPHS = """
from pydantic_graph import GraphBuilder, StepContext

from reflexr_graph import GraphAction

g = GraphBuilder(name="docpipe", input_type=int, output_type=int)


@g.step
async def double(ctx: StepContext[None, None, int]) -> int:
    return ctx.inputs * 2


g.add(g.edge_from(g.start_node).to(double), g.edge_from(double).to(g.end_node))
docpipe = GraphAction(g.build())
"""
OWN_WORKERS = '''"""The project's own Celery workers (image resizing): nothing to do with reflexr-graph."""

RESIZE_QUEUE = "resize"
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project: ``myapp/graphs.py`` with a GraphAction, and its own ``workers`` package."""
    root = tmp_path_factory.mktemp("project")
    for package, module, text in (("myapp", "graphs.py", GRAPHS), ("workers", "__init__.py", OWN_WORKERS)):
        (root / package).mkdir()
        (root / package / "__init__.py").touch()
        (root / package / module).write_text(text)
    return root


def project_env(redis_url: str, queue: str, graphs: str = "myapp.graphs:docpipe") -> dict[str, str]:
    """The environment a user's shell gives the worker: no PYTHONPATH (this suite's names the checkout)."""
    env = subprocesses.with_logfire(local_processes.environment({}))
    env.pop("PYTHONPATH", None)
    env.update(REFLEXR_REDIS_URL=redis_url, REFLEXR_QUEUE=queue, REFLEXR_GRAPHS=graphs)
    env.pop("REMAP_SIGTERM", None)  # as a user types it: plain celery re-executes itself to set it
    return env


@pytest.fixture
def start_in_project(project: Path, tmp_path: Path) -> Iterator[Callable[..., local_processes.Worker]]:
    started: list[local_processes.Worker] = []

    def start(command: Sequence[str], env: dict[str, str]) -> local_processes.Worker:
        name = f"user-{uuid.uuid4().hex[:6]}"
        argv = local_processes.celery_worker_argv("", env["REFLEXR_QUEUE"], name, command=command)
        log_path = tmp_path / f"{name}.log"
        worker = local_processes.Worker(name, local_processes.spawn(argv, env, log_path, project), log_path)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.kill()


ENTRIES = {
    "reflexr-graph worker": [str(BIN / "reflexr-graph"), "worker"],
    "celery -A reflexr_graph.worker worker": [str(BIN / "celery"), "-A", "reflexr_graph.worker", "worker"],
}


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_worker_started_in_a_users_project_serves_its_graph(
    start_in_project: Callable[..., local_processes.Worker], redis_url: str, entry: str
) -> None:
    """Started from the project directory, with no PYTHONPATH, the worker imports ``myapp.graphs``
    (the working directory counts, as the README says) and never the project's ``workers``: it serves a
    run of the project's graph to success."""
    queue = f"project-{uuid.uuid4().hex[:8]}"
    worker = start_in_project(ENTRIES[entry], project_env(redis_url, queue))

    def ready() -> bool:
        assert worker.alive(), f"the worker exited at start:\n{worker.log()[-3000:]}"
        return worker.ready()

    wait_for(ready, 45, f"{entry} to be ready")
    with Client(load_settings(redis_url=redis_url, queue=queue)) as client:
        run_id = client.enqueue("docpipe", 21)
        info = client.wait(run_id, timeout=60)
    assert (info.status, info.output) == (Status.SUCCEEDED, 42)


def test_a_graph_module_that_is_not_found_names_where_it_was_looked_for(
    project: Path, redis_url: str
) -> None:
    """The refusal says which directories were searched, the project directory (the working
    directory) first: a user sees at once whether the worker looked where their code is."""
    done = subprocess.run(
        [str(BIN / "reflexr-graph"), "worker"],
        cwd=project,
        env=project_env(redis_url, "unused", graphs="notmyapp.graphs:docpipe"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"no module named 'notmyapp'; searched {project}, " in done.stderr


def test_the_demo_outside_a_checkout_says_where_to_run_it(project: Path) -> None:
    """The demo's graph is the repository's example, which the wheel leaves out: from a project (whose
    own ``workers`` has no examples) it refuses at once, saying where to run it, and starts nothing."""
    done = subprocess.run(
        [str(BIN / "reflexr-graph"), "demo"],
        cwd=project,
        env=project_env("redis://127.0.0.1:1/0", "unused"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "run it from the root of a checkout of reflexr-graph" in done.stderr
    assert not (project / ".run").exists()


def test_the_wheel_installs_no_top_level_package_but_reflexr_graph(tmp_path: Path) -> None:
    """A project's own ``workers`` (a common name in Celery shops) must not meet one from the wheel."""
    uv = UV if UV.exists() else shutil.which("uv")
    if uv is None:
        pytest.skip("no uv to build the wheel with (`make install` installs it in .tools)")
    subprocess.run(
        [str(uv), "build", "--wheel", "-o", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
        env={**local_processes.environment({}), "UV_PYTHON_DOWNLOADS": "never"},
    )
    (wheel,) = tmp_path.glob("reflexr_graph-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"reflexr_graph"}
    assert "reflexr_graph/worker.py" in names, "the app users run"
