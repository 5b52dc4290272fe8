"""``failOnDataLoss``: what to do when offsets a query still needs are gone from the log.

Offsets disappear when retention or ``delete_records`` removes them before the query read
them, or when a topic or partition is deleted (or recreated, so offsets go backwards). With
``failOnDataLoss=true`` (the default, as in Spark) the query fails with instructions; with
``false`` it logs a warning and carries on from what is still there. Both messages say how to
flip the behaviour, because the right choice depends on the job.
"""

from __future__ import annotations

import logging

from sparklog.protocol.errors import SparklogError

log = logging.getLogger(__name__)

__all__ = ["DataLossError", "report_data_loss"]

_FAIL_HINT = (
    " Some data may have been lost because it is no longer available in the log: either it "
    "was removed by retention (or delete_records) before the query read it, or the topic or "
    "partition was deleted. If you want your streaming query to continue in such cases, set "
    "the source option 'failOnDataLoss' to 'false'."
)
_WARN_HINT = (
    " Some data may have been lost because it is no longer available in the log: either it "
    "was removed by retention (or delete_records) before the query read it, or the topic or "
    "partition was deleted. If you want your streaming query to fail in such cases, set the "
    "source option 'failOnDataLoss' to 'true'."
)


class DataLossError(SparklogError):
    """Offsets the query had to read are no longer in the log (failOnDataLoss=true)."""


def report_data_loss(fail_on_data_loss: bool, message: str) -> None:
    if fail_on_data_loss:
        raise DataLossError(message + _FAIL_HINT)
    log.warning("%s%s", message, _WARN_HINT)
