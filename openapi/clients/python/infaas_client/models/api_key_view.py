from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ApiKeyView")


@_attrs_define
class ApiKeyView:
    """
    Attributes:
        created_at_ms (int):
        id (str):
        name (str):
        prefix (str): First characters of the key.
        role (str):
        last_used_at_ms (int | None | Unset):
        revoked_at_ms (int | None | Unset):
    """

    created_at_ms: int
    id: str
    name: str
    prefix: str
    role: str
    last_used_at_ms: int | None | Unset = UNSET
    revoked_at_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at_ms = self.created_at_ms

        id = self.id

        name = self.name

        prefix = self.prefix

        role = self.role

        last_used_at_ms: int | None | Unset
        if isinstance(self.last_used_at_ms, Unset):
            last_used_at_ms = UNSET
        else:
            last_used_at_ms = self.last_used_at_ms

        revoked_at_ms: int | None | Unset
        if isinstance(self.revoked_at_ms, Unset):
            revoked_at_ms = UNSET
        else:
            revoked_at_ms = self.revoked_at_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at_ms": created_at_ms,
                "id": id,
                "name": name,
                "prefix": prefix,
                "role": role,
            }
        )
        if last_used_at_ms is not UNSET:
            field_dict["last_used_at_ms"] = last_used_at_ms
        if revoked_at_ms is not UNSET:
            field_dict["revoked_at_ms"] = revoked_at_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        created_at_ms = d.pop("created_at_ms")

        id = d.pop("id")

        name = d.pop("name")

        prefix = d.pop("prefix")

        role = d.pop("role")

        def _parse_last_used_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        last_used_at_ms = _parse_last_used_at_ms(d.pop("last_used_at_ms", UNSET))

        def _parse_revoked_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        revoked_at_ms = _parse_revoked_at_ms(d.pop("revoked_at_ms", UNSET))

        api_key_view = cls(
            created_at_ms=created_at_ms,
            id=id,
            name=name,
            prefix=prefix,
            role=role,
            last_used_at_ms=last_used_at_ms,
            revoked_at_ms=revoked_at_ms,
        )

        api_key_view.additional_properties = d
        return api_key_view

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
