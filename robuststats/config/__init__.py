"""File schemas and their loading: one strict pydantic base, YAML read with line numbers.

- :class:`Strict`: the base of every schema (unknown keys and coercions are errors, loaded
  specs are frozen);
- :mod:`.yaml_lines`: YAML loaded with the line of every key, so an error names the key path
  and its line (``studies/x.yaml: conditions.E8c.train_noise.scale (line 23): ...``);
- :mod:`.bounds` and :mod:`.fields`: the limits and the shared field types of study files
  (seeds, training noise, hypotheses), the engine's and the statistics' frozen dataclasses
  validated through the same loader (:func:`robuststats._fields.from_mapping`: keys
  against the fields, then the class's own checks; integers through
  :func:`robuststats._fields.check_whole`, which ``bounds.check_count`` is too);
- :mod:`.hints`: the unknown-key hints of a schema, computed from its fields;
- the sections other files share: :mod:`.sweep` (dose-response grids), :mod:`.diagnose`.

The study file itself (:class:`robuststats.runs.StudySpec`) is the platform's run
description and lives with it. No torch here.
"""

from __future__ import annotations

from robuststats.config._strict import Strict, omit_unset

__all__ = ["Strict", "omit_unset"]
