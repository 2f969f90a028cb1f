from django.urls import path

from . import views

app_name = "scheduling"

urlpatterns = [
    path("preemptions/", views.preemption_list, name="preemption_list"),
    path("preemptions.csv", views.preemption_csv, name="preemption_csv"),
    path("config/", views.config_edit, name="config_edit"),
    path("config/<int:config_id>/activate/", views.config_activate, name="config_activate"),
]
