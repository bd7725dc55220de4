"""The one exception tree: every error class has a kind, and every surface answers every kind."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import reflexr_graph
from reflexr_graph import errors
from reflexr_graph.api.problems import HTTP_STATUS
from reflexr_graph.cli.report import EXIT_CODES, problem_of
from reflexr_graph.errors import Kind, ReflexrError

PACKAGE = Path(reflexr_graph.__file__).parent
ACTS_WHEN_IMPORTED = ("reflexr_graph.__main__", "reflexr_graph.worker")
"""Modules that act when imported: __main__ runs the CLI, and worker.py builds the Celery app from
the process's REFLEXR_* environment (whatever an earlier test of this process left there). Neither
defines an exception class."""

OUTSIDE_THE_ROOT = {
    errors.Suspended: "a BaseException, so that a step's `except Exception` cannot swallow it",
}


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(reflexr_graph.__path__, "reflexr_graph.")]
    return [name for name in names if not name.endswith("__main__") and name not in ACTS_WHEN_IMPORTED]


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def _every_error_class() -> set[type[ReflexrError]]:
    for name in _modules():
        importlib.import_module(name)
    return _subclasses(ReflexrError) | {ReflexrError}  # type: ignore[return-value]


def test_every_error_class_has_a_kind_that_every_surface_answers() -> None:
    classes = _every_error_class()
    in_errors_py = {
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    }
    assert {c for c in in_errors_py if issubclass(c, ReflexrError)} <= classes
    assert len(classes) > 30, "the walk found the classes of every module, not only errors.py's"
    for cls in classes:
        assert isinstance(cls.error_kind, Kind), cls
    assert set(HTTP_STATUS) == set(Kind), "a kind the API would not answer"
    assert set(EXIT_CODES) == set(Kind), "a kind the CLI would not answer"


def test_the_cli_answers_each_class_by_its_kind() -> None:
    """Two classes that used to fall through to exit 1: a bad graph definition and a bad sentinel URL."""
    from reflexr_graph.store.sentinel import SentinelURLError, parse

    assert problem_of(errors.GraphDefinitionError("bad")).exit_code == 2
    with pytest.raises(SentinelURLError) as caught:
        parse("redis+sentinel:///mymaster")
    assert isinstance(caught.value, errors.SettingsError) and isinstance(caught.value, ValueError)
    assert problem_of(caught.value).exit_code == 2
    assert problem_of(errors.WaitTimeout("late")).exit_code == EXIT_CODES[Kind.TIMEOUT]


def test_a_class_without_a_kind_cannot_be_defined() -> None:
    with pytest.raises(TypeError, match="declares no error_kind"):

        class Forgotten(ReflexrError):
            pass

    class Inherited(errors.RunNotFound):
        pass

    assert Inherited.error_kind is Kind.NOT_FOUND


def _exception_classes_defined_in_the_package() -> list[type[BaseException]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module_name = ".".join(("reflexr_graph", *path.relative_to(PACKAGE).with_suffix("").parts))
        if module_name in ACTS_WHEN_IMPORTED:
            continue
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        module = importlib.import_module(
            ".".join(("reflexr_graph", *parts[: -1 if parts[-1] == "__init__" else None]))
        )
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name, None)
                if isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, Warning):
                    found.append(cls)
    return found


def test_every_exception_class_of_the_package_is_under_the_root() -> None:
    classes = _exception_classes_defined_in_the_package()
    assert errors.RunNotFound in classes and len(classes) > 30
    outside = [c for c in classes if not issubclass(c, ReflexrError) and c not in OUTSIDE_THE_ROOT]
    assert outside == [], f"exception classes outside ReflexrError: {outside}"
