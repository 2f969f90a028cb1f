from django.urls import path

from . import views

app_name = "scheduling"

urlpatterns = [
    path("preemptions/", views.preemption_list, name="preemption_list"),
]
