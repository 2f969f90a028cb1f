from django.urls import path

from . import views

app_name = "dashboards"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("data/<slug:chart>/", views.chart_data, name="chart_data"),
]
