"""Shared pieces of the form fuzz tests (tests/portal/<app>/test_forms_fuzz.py).

Values are what a browser (or someone with curl) can send in a form field: any text without
lone surrogates (not encodable, so never on the wire), plus the classics that break parsers:
huge and negative numbers, exponents, NaN, NUL, markup, unit suffixes.
"""

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# The db fixture is function-scoped: every example runs in the same test transaction, and
# each test compares row counts around each request itself.
FORM_FUZZ = settings(
    database=None,
    derandomize=True,
    deadline=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

CLASSICS = [
    "",
    " ",
    "0",
    "-1",
    "1.5",
    "9" * 30,
    "9" * 5000,
    "-" + "9" * 30,
    "1e400",
    "NaN",
    "inf",
    "\x00",
    "a\x00b",
    "Ω≈ç√",
    "' OR 1=1 --",
    "<script>alert(1)</script>",
    "16Gi",
    "500m",
    "-16Gi",
    "0.0001",
    "1" + "0" * 25 + "Gi",
    "on",
    "true",
    "x" * 600,
]

form_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=80)
form_values = st.one_of(
    st.sampled_from(CLASSICS),
    form_text,
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)


def form_error_keys(response: Any, *, formset_prefix: str | None = None) -> set[str]:
    """Every field that carries an error on the page rendered into `response`.

    Keys are the POST names: `name`, `tasks-0-gpus`; `<prefix>-management` for errors of the
    formset as a whole and `__all__` for the form's own non-field errors.
    """
    context = response.context
    keys: set[str] = set()
    form = context.get("form")
    if form is not None:
        keys |= set(form.errors)
    formset = context.get("formset") if formset_prefix else None
    if formset is not None:
        if formset.non_form_errors():
            keys.add(f"{formset_prefix}-management")
        for index, task_form in enumerate(formset.forms):
            keys |= {f"{formset_prefix}-{index}-{field}" for field in task_form.errors}
    return keys


def admin_error_keys(response: Any) -> set[str]:
    """Fields with errors on a Django admin add/change page (inline fields as POST names)."""
    context = response.context
    keys = set(context["adminform"].form.errors)
    for inline in context.get("inline_admin_formsets") or []:
        formset = inline.formset
        if formset.non_form_errors():
            keys.add(f"{formset.prefix}-management")
        for index, form in enumerate(formset.forms):
            keys |= {f"{formset.prefix}-{index}-{field}" for field in form.errors}
    return keys
