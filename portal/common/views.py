"""The error pages: JSON under /api/, HTML elsewhere."""

from django.views.decorators.csrf import requires_csrf_token

API_PREFIX = "/api/"
# What a missing page under each part of the site was: the 404 page names it.
NOT_FOUND_SUBJECTS = {"/jobs/": "job", "/queues/": "queue", "/tenants/": "tenant"}


@requires_csrf_token  # as Django's own: the page's log-out form needs the token
def page_not_found(request, exception):
    """404 for every unmatched URL: JSON under /api/ (clients parse it; a malformed id such as
    /api/v1/jobs/abc/ matches no route), the HTML page elsewhere."""
    from django.http import JsonResponse
    from django.shortcuts import render

    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    subject = next(
        (noun for prefix, noun in NOT_FOUND_SUBJECTS.items() if request.path.startswith(prefix)),
        "page",
    )
    return render(request, "404.html", {"subject": subject}, status=404)


def server_error(request):
    from django.http import JsonResponse
    from django.views import defaults

    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": "Internal server error.", "code": "error"}, status=500)
    return defaults.server_error(request)
