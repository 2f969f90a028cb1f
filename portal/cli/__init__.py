"""`python -m portal.cli`: a small command-line client for the portal's REST API.

Standard library only (argparse + urllib): it talks HTTP to `/api/v1/` with a token and
never imports Django.
"""
