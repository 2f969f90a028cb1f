"""ReusedFieldsSerializer: fields built once per thread, answers as a fresh serializer's."""

import threading

from rest_framework import serializers

from portal.api.base import ReusedFieldsSerializer, StrictSerializer
from portal.jobs.apis import JobCreateApi


class Fresh(StrictSerializer):
    class Item(StrictSerializer):
        name = serializers.CharField(max_length=5)
        count = serializers.IntegerField(min_value=1)

    title = serializers.CharField()
    size = serializers.IntegerField(required=False, allow_null=True)
    items = Item(many=True, allow_empty=False)


class Reused(ReusedFieldsSerializer):
    title = Fresh._declared_fields["title"]
    size = Fresh._declared_fields["size"]
    items = Fresh._declared_fields["items"]


BODIES = [
    {"title": "a", "items": [{"name": "x", "count": 1}]},
    {"title": "", "size": "big", "items": [{"name": "toolong", "count": 0}, {"nope": 1}]},
    {"title": "b", "size": None, "items": [{"name": "y", "count": 2}, {"name": "z", "count": 3}]},
    {"items": []},
    {"title": "c", "items": [{"name": "x", "count": 1}], "extra": True},
    [1, 2],
    {"title": "d", "items": "nope"},
    {"title": "a", "items": [{"name": "x", "count": 1}]},
]


def _answer(serializer_class, body):
    serializer = serializer_class(data=body)
    valid = serializer.is_valid()
    return valid, (serializer.validated_data if valid else serializer.errors)


def test_each_answer_is_a_fresh_serializers_whatever_came_before():
    for _ in range(2):
        for body in BODIES:
            assert _answer(Reused, body) == _answer(Fresh, body), body


def test_fields_are_built_once_and_answer_to_the_current_instance():
    first = Reused(data=BODIES[0], context={"n": 1})
    first.is_valid()
    second = Reused(data=BODIES[2], context={"n": 2})
    assert second.fields["items"] is first.fields["items"]
    assert second.fields["title"].root is second
    assert second.fields["items"].child.fields["name"].context == {"n": 2}
    assert second.is_valid()
    assert [item["name"] for item in second.validated_data["items"]] == ["y", "z"]


def test_each_thread_has_its_own_fields():
    here = Reused(data={}).fields["title"]
    seen = []
    thread = threading.Thread(target=lambda: seen.append(Reused(data={}).fields["title"]))
    thread.start()
    thread.join()
    assert seen[0] is not here
    assert seen[0].field_name == "title"


def test_job_create_input_answers_as_a_fresh_serializer():
    declared = JobCreateApi.InputSerializer._declared_fields
    fresh_job_input = type("FreshJobInput", (StrictSerializer,), dict(declared))
    task = {"name": "w", "replicas": 2, "image": "i", "gpus": 0.25, "env": {"A": "1"}}
    bodies = [
        {"queue": "q", "name": "a", "tasks": [task]},
        {"queue": "q" * 64, "name": "", "tasks": [dict(task, replicas=0, gpus=-1, bad=1)]},
        {"queue": "q", "name": "b", "tasks": [task, dict(task, name="m", command=["x", ""])]},
        {"queue": "q", "name": "c", "tasks": []},
        {"queue": 1, "name": "d", "tasks": [task], "priority": "high", "plugins": {"svc": 1}},
    ]
    for body in bodies * 2:
        assert _answer(JobCreateApi.InputSerializer, body) == _answer(fresh_job_input, body)
