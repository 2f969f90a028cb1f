"""The error pages: JSON under /api/, HTML elsewhere."""

API_PREFIX = "/api/"


def page_not_found(request, exception):
    """404 for every unmatched URL: JSON under /api/ (clients parse it; a malformed id such as
    /api/v1/jobs/abc/ matches no route), the HTML page elsewhere."""
    from django.http import JsonResponse
    from django.views import defaults

    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    from django.http import JsonResponse
    from django.views import defaults

    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": "Internal server error.", "code": "error"}, status=500)
    return defaults.server_error(request)
