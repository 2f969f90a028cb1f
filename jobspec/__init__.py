"""The job spec: the Volcano `batch.volcano.sh/v1alpha1` Job language the portal speaks. Pure.

What a job may say, and its limits' rules: a manifest (volcano), pod templates (podtemplate,
affinity, tolerations, quantity), Volcano's job plugins (job_plugins) and lifecycle policies
(policies), GPUs and shares of one (gpushare), the limits' rules and messages (limits; the
values in force are settings, portal.jobs.limits).

No Django, no Kubernetes client, no I/O (an import contract in pyproject.toml): the portal's
form, upload page, API and dry-run render and the scheduler's adapters all speak it.
"""
