"""`/api/tokens/`: a page to create (or replace) and revoke your API token."""

from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.generic import TemplateView
from rest_framework.authtoken.models import Token

from .services import api_token_create, api_token_revoke

TOKEN_CREATED = "A new API token was created; any previous token no longer works."
TOKEN_REVOKED = "Your API token was revoked."
TOKEN_NONE = "You have no API token."


class ApiTokenView(LoginRequiredMixin, TemplateView):
    template_name = "api/token_manage.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["token"] = Token.objects.filter(user=self.request.user).first()
        context["api_url"] = self.request.build_absolute_uri("/api/v1/")
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.POST.get("action") == "revoke":
            revoked = api_token_revoke(user=request.user)
            messages.success(request, TOKEN_REVOKED if revoked else TOKEN_NONE)
        else:
            api_token_create(user=request.user)
            messages.success(request, TOKEN_CREATED)
        return redirect("api:tokens")
