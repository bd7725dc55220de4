"""``python -m reflexr_graph`` runs the ``reflexr-graph`` command line."""

from reflexr_graph.cli import main

if __name__ == "__main__":
    main()
