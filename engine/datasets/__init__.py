"""The question files of the datasets the engine is trained and evaluated on.

* :mod:`engine.datasets.metaqa`: MetaQA's question types as relation paths, their gold patterns, and answers by
  following a path on a KB.
* :mod:`engine.datasets.questions`: the one reader of question files (MetaQA lines, PathQuestion lines, JSON Lines
  such as ``isorag synth`` output), used by the scorer's and the generator's training and by ``isorag eval``.

Pure Python over text: nothing here opens a store.
"""
