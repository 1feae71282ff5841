from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="LatencyView")


@_attrs_define
class LatencyView:
    """
    Attributes:
        batch (int):
        mean_ms (float):
        p50_ms (float):
        p99_ms (float):
        throughput_per_s (float): Rows per second at this batch size.
    """

    batch: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    throughput_per_s: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        batch = self.batch

        mean_ms = self.mean_ms

        p50_ms = self.p50_ms

        p99_ms = self.p99_ms

        throughput_per_s = self.throughput_per_s

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "batch": batch,
                "mean_ms": mean_ms,
                "p50_ms": p50_ms,
                "p99_ms": p99_ms,
                "throughput_per_s": throughput_per_s,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        batch = d.pop("batch")

        mean_ms = d.pop("mean_ms")

        p50_ms = d.pop("p50_ms")

        p99_ms = d.pop("p99_ms")

        throughput_per_s = d.pop("throughput_per_s")

        latency_view = cls(
            batch=batch,
            mean_ms=mean_ms,
            p50_ms=p50_ms,
            p99_ms=p99_ms,
            throughput_per_s=throughput_per_s,
        )

        latency_view.additional_properties = d
        return latency_view

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
