from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WhatIfPoint")


@_attrs_define
class WhatIfPoint:
    """One simulated second under one policy.

    Attributes:
        actions (int):
        arrivals (int):
        cost_per_s (float):
        cpu_instances (int):
        dropped (int):
        gpu_instances (int):
        second (int):
        cpu_workers (int | Unset): Live simulated workers without and with a GPU at the end of the second.
        gpu_workers (int | Unset):
        mean_accuracy (float | None | Unset):
        p50_ms (float | None | Unset):
        p99_ms (float | None | Unset):
        slo_attainment (float | None | Unset):
    """

    actions: int
    arrivals: int
    cost_per_s: float
    cpu_instances: int
    dropped: int
    gpu_instances: int
    second: int
    cpu_workers: int | Unset = UNSET
    gpu_workers: int | Unset = UNSET
    mean_accuracy: float | None | Unset = UNSET
    p50_ms: float | None | Unset = UNSET
    p99_ms: float | None | Unset = UNSET
    slo_attainment: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        actions = self.actions

        arrivals = self.arrivals

        cost_per_s = self.cost_per_s

        cpu_instances = self.cpu_instances

        dropped = self.dropped

        gpu_instances = self.gpu_instances

        second = self.second

        cpu_workers = self.cpu_workers

        gpu_workers = self.gpu_workers

        mean_accuracy: float | None | Unset
        if isinstance(self.mean_accuracy, Unset):
            mean_accuracy = UNSET
        else:
            mean_accuracy = self.mean_accuracy

        p50_ms: float | None | Unset
        if isinstance(self.p50_ms, Unset):
            p50_ms = UNSET
        else:
            p50_ms = self.p50_ms

        p99_ms: float | None | Unset
        if isinstance(self.p99_ms, Unset):
            p99_ms = UNSET
        else:
            p99_ms = self.p99_ms

        slo_attainment: float | None | Unset
        if isinstance(self.slo_attainment, Unset):
            slo_attainment = UNSET
        else:
            slo_attainment = self.slo_attainment

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "actions": actions,
                "arrivals": arrivals,
                "cost_per_s": cost_per_s,
                "cpu_instances": cpu_instances,
                "dropped": dropped,
                "gpu_instances": gpu_instances,
                "second": second,
            }
        )
        if cpu_workers is not UNSET:
            field_dict["cpu_workers"] = cpu_workers
        if gpu_workers is not UNSET:
            field_dict["gpu_workers"] = gpu_workers
        if mean_accuracy is not UNSET:
            field_dict["mean_accuracy"] = mean_accuracy
        if p50_ms is not UNSET:
            field_dict["p50_ms"] = p50_ms
        if p99_ms is not UNSET:
            field_dict["p99_ms"] = p99_ms
        if slo_attainment is not UNSET:
            field_dict["slo_attainment"] = slo_attainment

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        actions = d.pop("actions")

        arrivals = d.pop("arrivals")

        cost_per_s = d.pop("cost_per_s")

        cpu_instances = d.pop("cpu_instances")

        dropped = d.pop("dropped")

        gpu_instances = d.pop("gpu_instances")

        second = d.pop("second")

        cpu_workers = d.pop("cpu_workers", UNSET)

        gpu_workers = d.pop("gpu_workers", UNSET)

        def _parse_mean_accuracy(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        mean_accuracy = _parse_mean_accuracy(d.pop("mean_accuracy", UNSET))

        def _parse_p50_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        p50_ms = _parse_p50_ms(d.pop("p50_ms", UNSET))

        def _parse_p99_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        p99_ms = _parse_p99_ms(d.pop("p99_ms", UNSET))

        def _parse_slo_attainment(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        slo_attainment = _parse_slo_attainment(d.pop("slo_attainment", UNSET))

        what_if_point = cls(
            actions=actions,
            arrivals=arrivals,
            cost_per_s=cost_per_s,
            cpu_instances=cpu_instances,
            dropped=dropped,
            gpu_instances=gpu_instances,
            second=second,
            cpu_workers=cpu_workers,
            gpu_workers=gpu_workers,
            mean_accuracy=mean_accuracy,
            p50_ms=p50_ms,
            p99_ms=p99_ms,
            slo_attainment=slo_attainment,
        )

        what_if_point.additional_properties = d
        return what_if_point

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
