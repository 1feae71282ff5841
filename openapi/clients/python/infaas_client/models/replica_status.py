from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ReplicaStatus")


@_attrs_define
class ReplicaStatus:
    """One replica that has announced itself within the last lease period or two.

    Attributes:
        address (str): Where it listens.
        id (str):
        leader (bool): It holds the leader lease.
        seen_ms (int): When it last renewed its announcement.
        started_ms (int): When it first announced itself (ms since the Unix epoch, the database's clock).
    """

    address: str
    id: str
    leader: bool
    seen_ms: int
    started_ms: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        address = self.address

        id = self.id

        leader = self.leader

        seen_ms = self.seen_ms

        started_ms = self.started_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "address": address,
                "id": id,
                "leader": leader,
                "seen_ms": seen_ms,
                "started_ms": started_ms,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        address = d.pop("address")

        id = d.pop("id")

        leader = d.pop("leader")

        seen_ms = d.pop("seen_ms")

        started_ms = d.pop("started_ms")

        replica_status = cls(
            address=address,
            id=id,
            leader=leader,
            seen_ms=seen_ms,
            started_ms=started_ms,
        )

        replica_status.additional_properties = d
        return replica_status

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
