"""What the tests share, imported as ``helpers.<module>`` (tests/ is on sys.path, see pyproject's ``pythonpath``).

- ``helpers.marks``: what a test needs of the machine (a CUDA device, an optional package), in one place;
- ``helpers.kg``: KG names of their own, and a KG loaded once for a module (integration tests);
- ``helpers.llm_server``: the scripted OpenAI-compatible server behind the ``llm_server`` fixture;
- ``helpers.cli``, ``helpers.claims``, ``helpers.loads``, ``helpers.readme``: the inputs and readers that a unit test
  file and the integration file of the same name both use.
"""

from __future__ import annotations

from pathlib import Path

#: the repository's root (this file is tests/helpers/__init__.py)
ROOT = Path(__file__).resolve().parents[2]
