from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="NodeCondition")


@_attrs_define
class NodeCondition:
    """A condition on an earlier node's output, per row: exactly one of `label_in` or
    `top_probability_below`.

        Attributes:
            source (str): `"node.output"` of an earlier node.
            label_in (list[int] | None | Unset): Holds when the row's label (argmax of scores, or the integer label) is one
                of these.
            top_probability_below (float | None | Unset): Holds when the row's top probability is below this, in (0, 1]
                (scores that are not
                probabilities go through a softmax first).
    """

    source: str
    label_in: list[int] | None | Unset = UNSET
    top_probability_below: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        source = self.source

        label_in: list[int] | None | Unset
        if isinstance(self.label_in, Unset):
            label_in = UNSET
        elif isinstance(self.label_in, list):
            label_in = self.label_in

        else:
            label_in = self.label_in

        top_probability_below: float | None | Unset
        if isinstance(self.top_probability_below, Unset):
            top_probability_below = UNSET
        else:
            top_probability_below = self.top_probability_below

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "source": source,
            }
        )
        if label_in is not UNSET:
            field_dict["label_in"] = label_in
        if top_probability_below is not UNSET:
            field_dict["top_probability_below"] = top_probability_below

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        source = d.pop("source")

        def _parse_label_in(data: object) -> list[int] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                label_in_type_0 = cast(list[int], data)

                return label_in_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[int] | None | Unset, data)

        label_in = _parse_label_in(d.pop("label_in", UNSET))

        def _parse_top_probability_below(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        top_probability_below = _parse_top_probability_below(d.pop("top_probability_below", UNSET))

        node_condition = cls(
            source=source,
            label_in=label_in,
            top_probability_below=top_probability_below,
        )

        return node_condition
