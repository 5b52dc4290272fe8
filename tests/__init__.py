"""sparklog's test suite: a package, so tests import their helpers as ``tests.helpers.*``.

Packages all the way down (every test directory has an ``__init__.py``): pytest puts the
repository root on ``sys.path`` and imports test modules by their dotted name, so modules in
different directories may share a base name and no test edits ``sys.path``.
"""
