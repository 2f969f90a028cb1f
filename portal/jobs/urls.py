from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("", views.JobListView.as_view(), name="job_list"),
    path("<int:job_id>/", views.JobDetailView.as_view(), name="job_detail"),
    path("<int:job_id>/cancel/", views.JobCancelView.as_view(), name="job_cancel"),
]
