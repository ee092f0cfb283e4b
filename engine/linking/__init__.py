"""Names as people write them: misspelled, re-cased and aliased names resolve to the right entity.

:mod:`.names` defines the forms names are compared in, the spelling distance and the node distance that enters the
GSD; :mod:`.search` finds a written name's candidates by meaning and by spelling (a Neo4j full-text index over
names and aliases); :mod:`.text` links the entities a question or a claim mentions in plain text (the one linker of
the engine: the learned generator, claims and the triple scorer use it); :mod:`.local` looks a text's names up in
process, exactly and folded, in a graph read replica's names (the linker then asks Neo4j only for a name left
unknown); :mod:`.relations` names a relation in words ("directed_by": "directed by", "director", "directed"), as
the synthetic questions word it and the learned path composer reads it back.
"""

from engine.linking.names import NameMatch, fold_name, node_distance, normalize_name, spelling_distance

__all__ = ["NameMatch", "fold_name", "node_distance", "normalize_name", "spelling_distance"]
