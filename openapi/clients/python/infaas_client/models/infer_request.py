from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.tensor_json import TensorJson


T = TypeVar("T", bound="InferRequest")


@_attrs_define
class InferRequest:
    """
    Attributes:
        inputs (list[TensorJson]): The model's inputs, each with the same number of rows and a distinct name.
        latency_ms (float | None | Unset): Latency SLO in milliseconds (application queries).
        max_cost (float | None | Unset): Largest acceptable cost of the query, in the configured price unit.
        min_accuracy (float | None | Unset): Smallest acceptable accuracy, a fraction in [0, 1] (application queries).
    """

    inputs: list[TensorJson]
    latency_ms: float | None | Unset = UNSET
    max_cost: float | None | Unset = UNSET
    min_accuracy: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        inputs = []
        for inputs_item_data in self.inputs:
            inputs_item = inputs_item_data.to_dict()
            inputs.append(inputs_item)

        latency_ms: float | None | Unset
        if isinstance(self.latency_ms, Unset):
            latency_ms = UNSET
        else:
            latency_ms = self.latency_ms

        max_cost: float | None | Unset
        if isinstance(self.max_cost, Unset):
            max_cost = UNSET
        else:
            max_cost = self.max_cost

        min_accuracy: float | None | Unset
        if isinstance(self.min_accuracy, Unset):
            min_accuracy = UNSET
        else:
            min_accuracy = self.min_accuracy

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "inputs": inputs,
            }
        )
        if latency_ms is not UNSET:
            field_dict["latency_ms"] = latency_ms
        if max_cost is not UNSET:
            field_dict["max_cost"] = max_cost
        if min_accuracy is not UNSET:
            field_dict["min_accuracy"] = min_accuracy

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.tensor_json import TensorJson  # noqa: PLC0415

        d = dict(src_dict)
        inputs = []
        _inputs = d.pop("inputs")
        for inputs_item_data in _inputs:
            inputs_item = TensorJson.from_dict(inputs_item_data)

            inputs.append(inputs_item)

        def _parse_latency_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        latency_ms = _parse_latency_ms(d.pop("latency_ms", UNSET))

        def _parse_max_cost(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        max_cost = _parse_max_cost(d.pop("max_cost", UNSET))

        def _parse_min_accuracy(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        min_accuracy = _parse_min_accuracy(d.pop("min_accuracy", UNSET))

        infer_request = cls(
            inputs=inputs,
            latency_ms=latency_ms,
            max_cost=max_cost,
            min_accuracy=min_accuracy,
        )

        return infer_request
