from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PlannedNode")


@_attrs_define
class PlannedNode:
    """One node of a plan.

    Attributes:
        accuracy (float):
        branch_probability (float):
        cost_per_hour (float):
        hardware (str): `cpu` or `gpu`.
        max_batch (int):
        model (str):
        name (str):
        reach (float): Share of the pipeline's queries reaching the node.
        replicas (int):
        throughput_per_s (float):
        variant (str):
        predicted_p99_ms (float | None | Unset): Estimated p99 of the node's own latency (queueing and processing), ms;
            null when the
            estimator has none for the node.
    """

    accuracy: float
    branch_probability: float
    cost_per_hour: float
    hardware: str
    max_batch: int
    model: str
    name: str
    reach: float
    replicas: int
    throughput_per_s: float
    variant: str
    predicted_p99_ms: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        accuracy = self.accuracy

        branch_probability = self.branch_probability

        cost_per_hour = self.cost_per_hour

        hardware = self.hardware

        max_batch = self.max_batch

        model = self.model

        name = self.name

        reach = self.reach

        replicas = self.replicas

        throughput_per_s = self.throughput_per_s

        variant = self.variant

        predicted_p99_ms: float | None | Unset
        if isinstance(self.predicted_p99_ms, Unset):
            predicted_p99_ms = UNSET
        else:
            predicted_p99_ms = self.predicted_p99_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "accuracy": accuracy,
                "branch_probability": branch_probability,
                "cost_per_hour": cost_per_hour,
                "hardware": hardware,
                "max_batch": max_batch,
                "model": model,
                "name": name,
                "reach": reach,
                "replicas": replicas,
                "throughput_per_s": throughput_per_s,
                "variant": variant,
            }
        )
        if predicted_p99_ms is not UNSET:
            field_dict["predicted_p99_ms"] = predicted_p99_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        accuracy = d.pop("accuracy")

        branch_probability = d.pop("branch_probability")

        cost_per_hour = d.pop("cost_per_hour")

        hardware = d.pop("hardware")

        max_batch = d.pop("max_batch")

        model = d.pop("model")

        name = d.pop("name")

        reach = d.pop("reach")

        replicas = d.pop("replicas")

        throughput_per_s = d.pop("throughput_per_s")

        variant = d.pop("variant")

        def _parse_predicted_p99_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        predicted_p99_ms = _parse_predicted_p99_ms(d.pop("predicted_p99_ms", UNSET))

        planned_node = cls(
            accuracy=accuracy,
            branch_probability=branch_probability,
            cost_per_hour=cost_per_hour,
            hardware=hardware,
            max_batch=max_batch,
            model=model,
            name=name,
            reach=reach,
            replicas=replicas,
            throughput_per_s=throughput_per_s,
            variant=variant,
            predicted_p99_ms=predicted_p99_ms,
        )

        planned_node.additional_properties = d
        return planned_node

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
