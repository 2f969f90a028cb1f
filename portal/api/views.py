"""`/api/tokens/`: your API tokens: create one (its secret shown once), see when each was
last used, revoke any."""

from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views import View

from .forms import ApiTokenCreateForm
from .selectors import api_token_get, api_token_list
from .services import api_token_create, api_token_revoke, expiry_days_default

TOKEN_REVOKED = "Token “{name}” was revoked; requests with it now get 401."  # noqa: S105 - a message, not a secret
TOKEN_ALREADY_REVOKED = "Token “{name}” was already revoked."  # noqa: S105 - a message, not a secret


class ApiTokenView(LoginRequiredMixin, View):
    template_name = "api/token_manage.html"

    def _render(self, request: HttpRequest, form: ApiTokenCreateForm, **extra: Any) -> HttpResponse:
        now = timezone.now()
        tokens = [(token, token.state(now=now)) for token in api_token_list(user=request.user)]
        context = {
            "form": form,
            "tokens": tokens,
            "api_url": request.build_absolute_uri("/api/v1/"),
            **extra,
        }
        return render(request, self.template_name, context)

    def get(self, request: HttpRequest) -> HttpResponse:
        form = ApiTokenCreateForm(initial={"expires_in_days": expiry_days_default()})
        return self._render(request, form)

    def post(self, request: HttpRequest) -> HttpResponse:
        form = ApiTokenCreateForm(request.POST)
        if form.is_valid():
            try:
                token, secret = api_token_create(user=request.user, **form.cleaned_data)
            except ValidationError as error:
                form.add_error(None, error)
            else:
                # The secret is in this answer only (no redirect, no message stored in a
                # cookie); the middleware marks every signed-in page no-store.
                fresh = ApiTokenCreateForm(initial={"expires_in_days": expiry_days_default()})
                return self._render(request, fresh, created=token, secret=secret)
        return self._render(request, form)


class ApiTokenRevokeView(LoginRequiredMixin, View):
    http_method_names = ["post"]

    def post(self, request: HttpRequest, token_id: int) -> HttpResponse:
        token = api_token_get(user=request.user, token_id=token_id)
        if token is None:
            raise Http404("No such token of yours.")
        revoked = api_token_revoke(token=token, by=request.user)
        message = TOKEN_REVOKED if revoked else TOKEN_ALREADY_REVOKED
        messages.success(request, message.format(name=token.name))
        return redirect("api:tokens")
