from django.urls import path

from . import views

app_name = "accounting"

urlpatterns = [
    path("", views.UsageReportView.as_view(), name="report"),
]
