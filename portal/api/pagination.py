from rest_framework.pagination import LimitOffsetPagination


class ApiPagination(LimitOffsetPagination):
    """`?limit=&offset=`; responses are `{count, next, previous, results}`."""

    default_limit = 50
    max_limit = 500
