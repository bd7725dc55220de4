"""A module whose import fails because a dependency is missing."""

import reflexr_graph_no_such_dependency  # noqa: F401
