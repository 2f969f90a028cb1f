"""The embedded default's broker: a worker polling while a message is written never reads it
half-written. kombu's own filesystem transport does (an empty message, and the worker stops
on a JSONDecodeError); the portal's writes it under another name and renames it into place."""

from __future__ import annotations

import json

import pytest
from kombu import Connection
from kombu.transport import filesystem
from kombu.transport.virtual.base import Empty

from portal import celery_app
from portal.ops import broker


def channel(tmp_path, transport):
    folder = tmp_path / "broker"
    folder.mkdir()
    options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "control_folder": str(tmp_path / "control"),
    }
    return Connection("filesystem://localhost/", transport=transport, transport_options=options)


def test_each_message_is_read_back_whole_from_its_own_queue(tmp_path):
    with channel(tmp_path, broker.FilesystemTransport) as connection:
        chan = connection.default_channel
        for index in range(3):
            chan._put("cycle", {"body": index})
        chan._put("celery", {"body": "other queue"})
        # In name order, which is the order put only across milliseconds (as kombu's).
        assert sorted(chan._get("cycle")["body"] for _ in range(3)) == [0, 1, 2]
        with pytest.raises(Empty):
            chan._get("cycle")
        assert chan._get("celery") == {"body": "other queue"}
        assert not list((tmp_path / "broker").iterdir())  # no partial file left


def test_a_consumer_polling_during_the_write_finds_nothing_rather_than_half_a_message(
    tmp_path, monkeypatch
):
    with channel(tmp_path, broker.FilesystemTransport) as connection:
        chan = connection.default_channel
        polled = []
        rename = broker.os.replace

        def replace_after_a_poll(source, target):
            # The worst moment: the whole message written, not yet under its name.
            try:
                polled.append(chan._get("cycle"))
            except Empty:
                polled.append("empty")
            rename(source, target)

        monkeypatch.setattr(broker.os, "replace", replace_after_a_poll)
        chan._put("cycle", {"body": "whole"})
        assert polled == ["empty"]
        assert chan._get("cycle") == {"body": "whole"}


def test_kombus_own_transport_hands_a_poller_the_message_before_it_is_written(
    tmp_path, monkeypatch
):
    """Why the portal has its own _put: if this starts failing, kombu fixed it upstream."""
    with channel(tmp_path, filesystem.Transport) as connection:
        chan = connection.default_channel
        polled = []
        take_lock = filesystem.lock

        def lock_after_a_poll(file, flags):  # kombu locks between creating and writing
            try:
                chan._get("cycle")
            except json.JSONDecodeError as error:
                polled.append(error)
            take_lock(file, flags)

        monkeypatch.setattr(filesystem, "lock", lock_after_a_poll)
        chan._put("cycle", {"body": "whole"})
        assert len(polled) == 1


def test_a_filesystem_url_means_the_portals_transport():
    assert celery_app is not None  # imported: it names the transport for the scheme
    connection = Connection("filesystem://localhost/")
    assert connection.transport_cls == "filesystem"
    assert connection.get_transport_cls() is broker.FilesystemTransport


def test_the_apps_filesystem_broker_is_the_portals(tmp_path):
    """Whatever this run's broker is: the app given a filesystem:// URL uses our transport."""
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path),
               "control_folder": str(tmp_path / "control")}  # fmt: skip
    with celery_app.connection_for_write(
        url="filesystem://localhost/", transport_options=options
    ) as connection:
        assert isinstance(connection.default_channel, broker.Channel)
