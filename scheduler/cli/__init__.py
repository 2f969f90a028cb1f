"""Command-line entry points of ``python -m scheduler``; one module per command."""
