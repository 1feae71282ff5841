from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="WhatIfTrace")


@_attrs_define
class WhatIfTrace:
    """The trace a run replays.

    Attributes:
        apps (list[str]):
        description (str): The generator spec, `recorded traffic of ... over N minutes`, or `uploaded CSV`.
        duration_s (float): Time of the last arrival, seconds.
        queries (int):
        source (str): `recorded`, `csv` or `generate`.
    """

    apps: list[str]
    description: str
    duration_s: float
    queries: int
    source: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        apps = self.apps

        description = self.description

        duration_s = self.duration_s

        queries = self.queries

        source = self.source

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "apps": apps,
                "description": description,
                "duration_s": duration_s,
                "queries": queries,
                "source": source,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        apps = cast(list[str], d.pop("apps"))

        description = d.pop("description")

        duration_s = d.pop("duration_s")

        queries = d.pop("queries")

        source = d.pop("source")

        what_if_trace = cls(
            apps=apps,
            description=description,
            duration_s=duration_s,
            queries=queries,
            source=source,
        )

        what_if_trace.additional_properties = d
        return what_if_trace

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
