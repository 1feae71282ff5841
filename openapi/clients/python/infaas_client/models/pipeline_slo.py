from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PipelineSlo")


@_attrs_define
class PipelineSlo:
    """The end-to-end requirements.

    Attributes:
        latency_ms (float | None | Unset): End-to-end latency the `percentile` of queries must be answered within, in
            ms.
        max_cost_per_hour (float | None | Unset): Most the pipeline's resources may cost per hour, in dollars.
        min_accuracy (float | None | Unset): Minimum end-to-end accuracy, in [0, 1].
        percentile (float | None | Unset): Percentile of queries the latency holds for, in (0, 100] (default 99).
    """

    latency_ms: float | None | Unset = UNSET
    max_cost_per_hour: float | None | Unset = UNSET
    min_accuracy: float | None | Unset = UNSET
    percentile: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        latency_ms: float | None | Unset
        if isinstance(self.latency_ms, Unset):
            latency_ms = UNSET
        else:
            latency_ms = self.latency_ms

        max_cost_per_hour: float | None | Unset
        if isinstance(self.max_cost_per_hour, Unset):
            max_cost_per_hour = UNSET
        else:
            max_cost_per_hour = self.max_cost_per_hour

        min_accuracy: float | None | Unset
        if isinstance(self.min_accuracy, Unset):
            min_accuracy = UNSET
        else:
            min_accuracy = self.min_accuracy

        percentile: float | None | Unset
        if isinstance(self.percentile, Unset):
            percentile = UNSET
        else:
            percentile = self.percentile

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if latency_ms is not UNSET:
            field_dict["latency_ms"] = latency_ms
        if max_cost_per_hour is not UNSET:
            field_dict["max_cost_per_hour"] = max_cost_per_hour
        if min_accuracy is not UNSET:
            field_dict["min_accuracy"] = min_accuracy
        if percentile is not UNSET:
            field_dict["percentile"] = percentile

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_latency_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        latency_ms = _parse_latency_ms(d.pop("latency_ms", UNSET))

        def _parse_max_cost_per_hour(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        max_cost_per_hour = _parse_max_cost_per_hour(d.pop("max_cost_per_hour", UNSET))

        def _parse_min_accuracy(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        min_accuracy = _parse_min_accuracy(d.pop("min_accuracy", UNSET))

        def _parse_percentile(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        percentile = _parse_percentile(d.pop("percentile", UNSET))

        pipeline_slo = cls(
            latency_ms=latency_ms,
            max_cost_per_hour=max_cost_per_hour,
            min_accuracy=min_accuracy,
            percentile=percentile,
        )

        return pipeline_slo
