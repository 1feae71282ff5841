from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PlanTrace")


@_attrs_define
class PlanTrace:
    """The planning trace.

    Attributes:
        duration_s (float):
        mean_rate_per_s (float):
        queries (int):
        source (str): `recorded`, `generated: SPEC` or `uploaded`.
    """

    duration_s: float
    mean_rate_per_s: float
    queries: int
    source: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        duration_s = self.duration_s

        mean_rate_per_s = self.mean_rate_per_s

        queries = self.queries

        source = self.source

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "duration_s": duration_s,
                "mean_rate_per_s": mean_rate_per_s,
                "queries": queries,
                "source": source,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        duration_s = d.pop("duration_s")

        mean_rate_per_s = d.pop("mean_rate_per_s")

        queries = d.pop("queries")

        source = d.pop("source")

        plan_trace = cls(
            duration_s=duration_s,
            mean_rate_per_s=mean_rate_per_s,
            queries=queries,
            source=source,
        )

        plan_trace.additional_properties = d
        return plan_trace

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
