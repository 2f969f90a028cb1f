from django.urls import path

from . import views

app_name = "cluster"

urlpatterns = [
    path("nodes/", views.node_list, name="node_list"),
]
