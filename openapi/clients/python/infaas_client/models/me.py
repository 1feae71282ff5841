from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.quota_view import QuotaView


T = TypeVar("T", bound="Me")


@_attrs_define
class Me:
    """
    Attributes:
        api_key_id (str):
        models (int):
        quotas (QuotaView):
        role (str): `admin` or `member`.
        stored_bytes (int):
        tenant (str):
        tenant_id (str):
    """

    api_key_id: str
    models: int
    quotas: QuotaView
    role: str
    stored_bytes: int
    tenant: str
    tenant_id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        api_key_id = self.api_key_id

        models = self.models

        quotas = self.quotas.to_dict()

        role = self.role

        stored_bytes = self.stored_bytes

        tenant = self.tenant

        tenant_id = self.tenant_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "api_key_id": api_key_id,
                "models": models,
                "quotas": quotas,
                "role": role,
                "stored_bytes": stored_bytes,
                "tenant": tenant,
                "tenant_id": tenant_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.quota_view import QuotaView  # noqa: PLC0415

        d = dict(src_dict)
        api_key_id = d.pop("api_key_id")

        models = d.pop("models")

        quotas = QuotaView.from_dict(d.pop("quotas"))

        role = d.pop("role")

        stored_bytes = d.pop("stored_bytes")

        tenant = d.pop("tenant")

        tenant_id = d.pop("tenant_id")

        me = cls(
            api_key_id=api_key_id,
            models=models,
            quotas=quotas,
            role=role,
            stored_bytes=stored_bytes,
            tenant=tenant,
            tenant_id=tenant_id,
        )

        me.additional_properties = d
        return me

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
