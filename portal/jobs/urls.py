from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("", views.JobListView.as_view(), name="job_list"),
    path("new/", views.JobSubmitView.as_view(), name="job_submit"),
    path("upload/", views.JobUploadView.as_view(), name="job_upload"),
    path("upload/sample.yaml", views.JobSampleView.as_view(), name="job_sample"),
    path("<int:job_id>/", views.JobDetailView.as_view(), name="job_detail"),
    path("<int:job_id>/live/", views.JobLiveView.as_view(), name="job_live"),
    path("<int:job_id>/cancel/", views.JobCancelView.as_view(), name="job_cancel"),
    path("<int:job_id>/release/", views.JobReleaseView.as_view(), name="job_release"),
]
