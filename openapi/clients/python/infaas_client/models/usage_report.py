from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.usage_minute import UsageMinute


T = TypeVar("T", bound="UsageReport")


@_attrs_define
class UsageReport:
    """
    Attributes:
        app (str):
        cost (float):
        minutes (list[UsageMinute]):
        requests (int):
        slo_attainment (float | None | Unset): Fraction of queries that met their SLO (queries without an SLO count as
            met).
    """

    app: str
    cost: float
    minutes: list[UsageMinute]
    requests: int
    slo_attainment: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        app = self.app

        cost = self.cost

        minutes = []
        for minutes_item_data in self.minutes:
            minutes_item = minutes_item_data.to_dict()
            minutes.append(minutes_item)

        requests = self.requests

        slo_attainment: float | None | Unset
        if isinstance(self.slo_attainment, Unset):
            slo_attainment = UNSET
        else:
            slo_attainment = self.slo_attainment

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "app": app,
                "cost": cost,
                "minutes": minutes,
                "requests": requests,
            }
        )
        if slo_attainment is not UNSET:
            field_dict["slo_attainment"] = slo_attainment

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.usage_minute import UsageMinute  # noqa: PLC0415

        d = dict(src_dict)
        app = d.pop("app")

        cost = d.pop("cost")

        minutes = []
        _minutes = d.pop("minutes")
        for minutes_item_data in _minutes:
            minutes_item = UsageMinute.from_dict(minutes_item_data)

            minutes.append(minutes_item)

        requests = d.pop("requests")

        def _parse_slo_attainment(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        slo_attainment = _parse_slo_attainment(d.pop("slo_attainment", UNSET))

        usage_report = cls(
            app=app,
            cost=cost,
            minutes=minutes,
            requests=requests,
            slo_attainment=slo_attainment,
        )

        usage_report.additional_properties = d
        return usage_report

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
