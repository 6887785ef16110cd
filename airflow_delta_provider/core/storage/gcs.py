"""Google Cloud Storage (``gs://``, ``gcs://``) through gcsfs.

Put-if-absent is an upload with ``ifGenerationMatch=0`` (gcsfs's ``mode="create"``): the
service answers 412 when the name exists, in the same request that would create it.
Deletions go in JSON API batch requests (``POST /batch/storage/v1``, up to 100 ``DELETE``
sub-requests each; 200/204 deleted, 404 missing), scheduled by :mod:`.deletes`, sent through gcsfs's
authenticated session, with single-object DELETEs where the endpoint refuses batches.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from airflow_delta_provider.core.storage.cloud import ConditionalObjectStore
from airflow_delta_provider.core.storage.deletes import DELETED, MISSING, BatchRefused, refusal_status
from airflow_delta_provider.core.storage.sdk_compat import gcs_call, gcs_remove

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import fsspec

_CONTENT_ID = re.compile(r"^content-id:\s*<response-(\d+)>", re.IGNORECASE | re.MULTILINE)
_STATUS = re.compile(r"^HTTP/[0-9.]+ (\d{3})(.*)$", re.MULTILINE)
_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"')


def is_gcs_filesystem(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether ``fs`` is gcsfs (the store needs its create-only upload)."""
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "gs" in protocol and hasattr(fs, "_rm_files")


class GcsStore(ConditionalObjectStore):
    """A table in a GCS bucket."""

    store_name = "GCS"
    extra = "gcs"
    #: Calls per JSON API batch request (the service's maximum).
    delete_batch_size = 100

    def _create(self, path: str, data: bytes) -> None:
        # gcsfs adds ifGenerationMatch=0 for mode="create" and raises FileExistsError on 412.
        self.fs.pipe_file(path, data, mode="create")

    async def _delete_one(self, path: str) -> bool:
        try:
            await gcs_remove(self.fs, path)
        except FileNotFoundError:
            return False
        return True

    async def _send_delete_batch(self, paths: Sequence[str]) -> Mapping[str, str]:
        """One JSON API batch request through gcsfs's session (its credentials and retries).

        Not gcsfs's ``_rm_files``: it reports a missing object as an error without its name,
        and its sub-requests end without the blank line after their headers, which
        fake-gcs-server answers with 400 for each. Object names are encoded whole (``/`` too),
        as the JSON API's object paths require.
        """
        from gcsfs.retry import HttpError

        fs: Any = self.fs
        boundary = f"batch_{uuid.uuid4().hex}"
        query = urlencode(_request_params(fs))
        parts = []
        for i, path in enumerate(paths):
            bucket, key, _ = fs.split_path(path)
            target = f"/storage/v1/b/{quote(bucket, safe='')}/o/{quote(key, safe='')}"
            parts.append(
                f"--{boundary}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
                f"Content-ID: <{i}>\r\n\r\n"
                f"DELETE {target}{'?' + query if query else ''} HTTP/1.1\r\nContent-Length: 0\r\n\r\n\r\n"
            )
        body = "".join(parts) + f"--{boundary}--\r\n"
        try:
            headers, content = await gcs_call(
                fs,
                "POST",
                fs.batch_url_base,
                headers={"Content-Type": f"multipart/mixed; boundary={boundary}"},
                data=body.encode(),
            )
        except FileNotFoundError as err:
            raise BatchRefused(f"404 for {fs.batch_url_base}") from err
        except HttpError as err:
            if refusal_status(getattr(err, "code", None)):
                raise BatchRefused(f"{err.code} {err.message}") from err
            raise
        except ValueError as err:  # gcsfs's form of a 400 "invalid ..." answer
            raise BatchRefused(str(err)) from err
        return _answers(paths, headers.get("Content-Type", ""), content.decode("utf-8", "replace"))


def _request_params(fs: Any) -> dict[str, str]:
    """The query parameters gcsfs adds to every request: ``userProject`` for requester-pays buckets."""
    requester_pays = getattr(fs, "requester_pays", False)
    if not requester_pays:
        return {}
    return {"userProject": requester_pays if isinstance(requester_pays, str) else fs.project}


def _answers(paths: Sequence[str], content_type: str, text: str) -> dict[str, str]:
    """Per path, the answer in a JSON API batch response (matched by ``Content-ID``)."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if match is None:
        return {}
    answers: dict[str, str] = {}
    for part in text.split(f"--{match.group(1)}"):
        ident, status = _CONTENT_ID.search(part), _STATUS.search(part)
        if ident is None or status is None or int(ident.group(1)) >= len(paths):
            continue
        code = int(status.group(1))
        path = paths[int(ident.group(1))]
        if code in (200, 204):
            answers[path] = DELETED
        elif code == 404:
            answers[path] = MISSING
        else:
            message = _MESSAGE.search(part)
            answers[path] = f"{code} {message.group(1) if message else status.group(2).strip()}"
    return answers
