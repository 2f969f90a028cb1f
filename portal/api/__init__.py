"""The REST API (`/api/v1/`): shared errors, parsers, pagination, permissions and routing.

The endpoints themselves live next to their app in `portal/<app>/apis.py`.
"""
