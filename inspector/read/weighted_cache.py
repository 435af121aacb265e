"""An LRU cache bounded by the total weight of its values (bytes, nodes), not only their count.

The readers cache decoded payloads and node tables. A count bound alone lets a capture of 200k-node
graphs hold gigabytes; a weight bound keeps memory to what is being examined. A value heavier than
the whole budget is not kept at all (the caller holds it while it needs it).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable

_MISSING = object()


class WeightedLRU:
    def __init__(self, max_weight: int, max_items: int):
        self.max_weight = max_weight
        self.max_items = max_items
        self.weight = 0
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get(self, key: Hashable, default: Any = None) -> Any:
        item = self._items.get(key, _MISSING)
        if item is _MISSING:
            return default
        self._items.move_to_end(key)
        return item[0]  # type: ignore[index]  # _MISSING is returned above; the rest are (value, weight)

    def put(self, key: Hashable, value: Any, weight: int) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self.weight -= old[1]
        if weight > self.max_weight:
            return
        self._items[key] = (value, weight)
        self.weight += weight
        while self.weight > self.max_weight or len(self._items) > self.max_items:
            _, (_, w) = self._items.popitem(last=False)
            self.weight -= w

    def pop(self, key: Hashable, default: Any = None) -> Any:
        item = self._items.pop(key, None)
        if item is None:
            return default
        self.weight -= item[1]
        return item[0]

    def clear(self) -> None:
        self._items.clear()
        self.weight = 0
