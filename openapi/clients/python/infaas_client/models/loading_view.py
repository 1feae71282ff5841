from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="LoadingView")


@_attrs_define
class LoadingView:
    """A load under way for queries (selection sends further queries for the variant to it, and
    counts the rows already waiting when it predicts their latency).

        Attributes:
            started_ms_ago (int): Milliseconds since the load started.
            variant (str):
            waiting_rows (int): Rows of queries waiting for the load now.
    """

    started_ms_ago: int
    variant: str
    waiting_rows: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        started_ms_ago = self.started_ms_ago

        variant = self.variant

        waiting_rows = self.waiting_rows

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "started_ms_ago": started_ms_ago,
                "variant": variant,
                "waiting_rows": waiting_rows,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        started_ms_ago = d.pop("started_ms_ago")

        variant = d.pop("variant")

        waiting_rows = d.pop("waiting_rows")

        loading_view = cls(
            started_ms_ago=started_ms_ago,
            variant=variant,
            waiting_rows=waiting_rows,
        )

        loading_view.additional_properties = d
        return loading_view

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
