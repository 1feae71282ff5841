from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WhatIfAppSummary")


@_attrs_define
class WhatIfAppSummary:
    """One application's totals under one policy (SIMULATED).

    Attributes:
        app (str):
        dropped (int):
        queries (int):
        slo_attainment (float):
        mean_accuracy (float | None | Unset):
        p99_ms (float | None | Unset):
    """

    app: str
    dropped: int
    queries: int
    slo_attainment: float
    mean_accuracy: float | None | Unset = UNSET
    p99_ms: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        app = self.app

        dropped = self.dropped

        queries = self.queries

        slo_attainment = self.slo_attainment

        mean_accuracy: float | None | Unset
        if isinstance(self.mean_accuracy, Unset):
            mean_accuracy = UNSET
        else:
            mean_accuracy = self.mean_accuracy

        p99_ms: float | None | Unset
        if isinstance(self.p99_ms, Unset):
            p99_ms = UNSET
        else:
            p99_ms = self.p99_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "app": app,
                "dropped": dropped,
                "queries": queries,
                "slo_attainment": slo_attainment,
            }
        )
        if mean_accuracy is not UNSET:
            field_dict["mean_accuracy"] = mean_accuracy
        if p99_ms is not UNSET:
            field_dict["p99_ms"] = p99_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        app = d.pop("app")

        dropped = d.pop("dropped")

        queries = d.pop("queries")

        slo_attainment = d.pop("slo_attainment")

        def _parse_mean_accuracy(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        mean_accuracy = _parse_mean_accuracy(d.pop("mean_accuracy", UNSET))

        def _parse_p99_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        p99_ms = _parse_p99_ms(d.pop("p99_ms", UNSET))

        what_if_app_summary = cls(
            app=app,
            dropped=dropped,
            queries=queries,
            slo_attainment=slo_attainment,
            mean_accuracy=mean_accuracy,
            p99_ms=p99_ms,
        )

        what_if_app_summary.additional_properties = d
        return what_if_app_summary

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
