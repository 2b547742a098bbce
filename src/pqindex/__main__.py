"""``python -m pqindex`` runs the command line."""

from pqindex.cli import main

main()
