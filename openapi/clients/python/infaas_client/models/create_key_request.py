from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.key_role import KeyRole
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateKeyRequest")


@_attrs_define
class CreateKeyRequest:
    """
    Attributes:
        name (str): A label for the key, e.g. `ci` or `alice`: 1-128 characters, not all blank.
        role (KeyRole | None | Unset):
    """

    name: str
    role: KeyRole | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        role: None | str | Unset
        if isinstance(self.role, Unset):
            role = UNSET
        elif isinstance(self.role, KeyRole):
            role = self.role.value
        else:
            role = self.role

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
        if role is not UNSET:
            field_dict["role"] = role

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        def _parse_role(data: object) -> KeyRole | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                role_type_1 = KeyRole(data)

                return role_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(KeyRole | None | Unset, data)

        role = _parse_role(d.pop("role", UNSET))

        create_key_request = cls(
            name=name,
            role=role,
        )

        return create_key_request
