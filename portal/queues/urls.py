from django.urls import path

from . import views

app_name = "queues"

urlpatterns = [
    path("", views.QueueListView.as_view(), name="queue_list"),
    path("<int:queue_id>/edit/", views.QueueEditView.as_view(), name="queue_edit"),
    path("<int:queue_id>/preview/", views.QueuePreviewView.as_view(), name="queue_preview"),
]
