from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="QuotaView")


@_attrs_define
class QuotaView:
    """
    Attributes:
        max_models (int):
        max_stored_bytes (int):
        requests_per_second (float):
    """

    max_models: int
    max_stored_bytes: int
    requests_per_second: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        max_models = self.max_models

        max_stored_bytes = self.max_stored_bytes

        requests_per_second = self.requests_per_second

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "max_models": max_models,
                "max_stored_bytes": max_stored_bytes,
                "requests_per_second": requests_per_second,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        max_models = d.pop("max_models")

        max_stored_bytes = d.pop("max_stored_bytes")

        requests_per_second = d.pop("requests_per_second")

        quota_view = cls(
            max_models=max_models,
            max_stored_bytes=max_stored_bytes,
            requests_per_second=requests_per_second,
        )

        quota_view.additional_properties = d
        return quota_view

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
