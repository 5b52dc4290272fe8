"""``python -m tests.helpers.faulty_store_server <sparklog args>``: sparklog's CLI in a
process where fsspec knows the ``faulty://`` protocol (``tests.helpers.object_store.
FaultyStore``), so a real ``sparklog server`` can be given a tier that fails, delays, cuts
off or hangs store calls, with no change to the product: only the store's URL and options
(``--set remote.log.storage.url=faulty://...``) differ from a real one's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import fsspec

from sparklog.cli.main import main
from tests.helpers.object_store import FaultyStore


def run(argv: Sequence[str]) -> int:
    fsspec.register_implementation(FaultyStore.protocol, FaultyStore, clobber=True)
    return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
