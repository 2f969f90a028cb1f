"""The embedded default's Celery broker: kombu's filesystem transport, with each message
written under a name no consumer reads and then renamed into place.

kombu's own `_put` creates a message's file under its final name and then writes it, while
`_get` moves and reads any file of that name it finds, without taking the writer's lock. A
worker polling in between reads an empty message and stops on a JSONDecodeError
("Unrecoverable error"; reported upstream as celery/kombu#1551, seen here in the worker's
end-to-end test). A rename within one folder is atomic on POSIX and Windows: a consumer finds
either no file or the whole message. Everything else is kombu's.

portal/celery.py makes the URL scheme filesystem:// name this class.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        # The name kombu's _get looks for: "<ms>_<uuid>.<queue>.msg", taken in name order.
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        # Starts with a dot: _get compares what follows the first dot with "<queue>.msg".
        partial = os.path.join(self.data_folder_out, f".partial-{uuid.uuid4()}")
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class FilesystemTransport(filesystem.Transport):
    Channel = Channel
