from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="UsageMinute")


@_attrs_define
class UsageMinute:
    """
    Attributes:
        cost (float):
        hardware (str):
        max_latency_ms (float):
        mean_latency_ms (float):
        minute (int): Start of the minute, milliseconds since the Unix epoch.
        model (str):
        requests (int):
        rows (int):
        slo_met (int):
        slo_missed (int):
        variant (str):
    """

    cost: float
    hardware: str
    max_latency_ms: float
    mean_latency_ms: float
    minute: int
    model: str
    requests: int
    rows: int
    slo_met: int
    slo_missed: int
    variant: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cost = self.cost

        hardware = self.hardware

        max_latency_ms = self.max_latency_ms

        mean_latency_ms = self.mean_latency_ms

        minute = self.minute

        model = self.model

        requests = self.requests

        rows = self.rows

        slo_met = self.slo_met

        slo_missed = self.slo_missed

        variant = self.variant

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cost": cost,
                "hardware": hardware,
                "max_latency_ms": max_latency_ms,
                "mean_latency_ms": mean_latency_ms,
                "minute": minute,
                "model": model,
                "requests": requests,
                "rows": rows,
                "slo_met": slo_met,
                "slo_missed": slo_missed,
                "variant": variant,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cost = d.pop("cost")

        hardware = d.pop("hardware")

        max_latency_ms = d.pop("max_latency_ms")

        mean_latency_ms = d.pop("mean_latency_ms")

        minute = d.pop("minute")

        model = d.pop("model")

        requests = d.pop("requests")

        rows = d.pop("rows")

        slo_met = d.pop("slo_met")

        slo_missed = d.pop("slo_missed")

        variant = d.pop("variant")

        usage_minute = cls(
            cost=cost,
            hardware=hardware,
            max_latency_ms=max_latency_ms,
            mean_latency_ms=mean_latency_ms,
            minute=minute,
            model=model,
            requests=requests,
            rows=rows,
            slo_met=slo_met,
            slo_missed=slo_missed,
            variant=variant,
        )

        usage_minute.additional_properties = d
        return usage_minute

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
