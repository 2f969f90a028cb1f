"""The preemption deadline as a pod sees it: the annotation's text, and its file."""

from datetime import datetime, timedelta, timezone

from jobspec.notice import (
    DEADLINE_ANNOTATION,
    PODINFO_DIR,
    PODINFO_VOLUME,
    deadline_text,
    with_deadline_volume,
)


def test_the_deadline_is_rfc3339_in_utc_to_the_second():
    paris = timezone(timedelta(hours=1))
    at = datetime(2026, 12, 1, 13, 5, 0, 999_999, tzinfo=paris)
    assert deadline_text(at) == "2026-12-01T12:05:00Z"


def test_every_container_mounts_the_annotation_read_only():
    body = {"containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "x"}]}]}

    body = with_deadline_volume(body)

    (volume,) = body["volumes"]
    assert volume["name"] == PODINFO_VOLUME
    field = volume["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"]
    assert field == f"metadata.annotations['{DEADLINE_ANNOTATION}']"
    mount = {"name": PODINFO_VOLUME, "mountPath": PODINFO_DIR, "readOnly": True}
    assert body["containers"][0]["volumeMounts"] == [mount]
    assert body["containers"][1]["volumeMounts"] == [{"name": "x"}, mount]


def test_a_pod_that_has_the_volume_already_is_left_as_it_is():
    body = {"containers": [{"name": "a"}], "volumes": [{"name": PODINFO_VOLUME, "emptyDir": {}}]}
    assert with_deadline_volume(body) == {
        "containers": [{"name": "a"}],
        "volumes": [{"name": PODINFO_VOLUME, "emptyDir": {}}],
    }
