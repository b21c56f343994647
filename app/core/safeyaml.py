"""YAML from an untrusted repository, loaded with limits (pure: text in, value or ``YAMLLimitError``).

``yaml.safe_load`` builds no objects of the attacker's choosing, but nothing bounds its work:

- an alias bomb ("billion laughs": ``a1: [*a0, *a0, ...]``, nine levels) is a few hundred bytes
  that expand to ~10^9 nodes; the loader shares the aliased objects, so the load is quick, and
  whatever walks the value afterwards (validation, ``json.dumps``) takes minutes or all memory;
- ``[[[[...]]]]`` a few thousand levels deep makes the composer recurse until ``RecursionError``.

``load_capped`` refuses a text over ``max_bytes`` before parsing it, and composes with a
``SafeLoader`` whose composer counts, for every node, the nodes it stands for once its aliases
are expanded, and its depth: the load stops at the first node over a cap, so the work done is
bounded by the caps, whatever the document (an alias to a node still being composed, i.e. an
infinite expansion, is refused at once). The pure-Python loader is used: the C one composes in C,
where these counts cannot be kept.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode


class YAMLLimitError(ValueError):
    """The text is over a size, nesting or alias-expansion cap; the message says which and where."""


class _CappedLoader(yaml.SafeLoader):
    def __init__(self, text: str, *, max_depth: int, max_nodes: int) -> None:
        super().__init__(text)
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.depth = 0
        self.composed = 0  # nodes composed (work done), aliases included
        self._expanded: dict[int, int] = {}  # id(node) -> nodes it stands for, once finished

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self.composed += 1
        mark = self.peek_event().start_mark
        if self.check_event(AliasEvent):
            node = super().compose_node(parent, index)
            if node is None or id(node) not in self._expanded:
                raise YAMLLimitError(f"an alias refers to the node it is inside, at {_at(mark)}")
            return node
        self.depth += 1
        if self.depth > self.max_depth:
            raise YAMLLimitError(f"nests deeper than {self.max_depth} levels at {_at(mark)}; flatten it")
        node = super().compose_node(parent, index)
        self.depth -= 1
        if node is None:
            return None
        size = 1 + sum(self._expanded[id(child)] for child in _children(node))
        if size > self.max_nodes:
            raise YAMLLimitError(
                f"stands for more than {self.max_nodes} values once its aliases are expanded "
                f"(the node at {_at(mark)}); write the values out or use fewer aliases"
            )
        self._expanded[id(node)] = size
        return node


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "an unknown place"


def load_capped(text: str, *, max_bytes: int, max_depth: int, max_nodes: int) -> Any:
    """The one document in ``text``; ``YAMLLimitError`` past a cap, ``yaml.YAMLError`` if invalid."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise YAMLLimitError(f"is {size} bytes, over the {max_bytes}-byte cap")
    loader = _CappedLoader(text, max_depth=max_depth, max_nodes=max_nodes)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
