from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LeaderStatus")


@_attrs_define
class LeaderStatus:
    """The leader lease as a replica sees it.

    Attributes:
        token (int): The lease's fencing token: raised at every change of leader; the leader's scaling
            decisions carry it, and a deposed leader's are refused.
        address (None | str | Unset): Where the leader listens.
        replica (None | str | Unset): The replica that holds the lease; absent while none does (the previous leader died
            and its lease has not lapsed yet, or it lapsed and no replica has taken it).
    """

    token: int
    address: None | str | Unset = UNSET
    replica: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        token = self.token

        address: None | str | Unset
        if isinstance(self.address, Unset):
            address = UNSET
        else:
            address = self.address

        replica: None | str | Unset
        if isinstance(self.replica, Unset):
            replica = UNSET
        else:
            replica = self.replica

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "token": token,
            }
        )
        if address is not UNSET:
            field_dict["address"] = address
        if replica is not UNSET:
            field_dict["replica"] = replica

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        token = d.pop("token")

        def _parse_address(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        address = _parse_address(d.pop("address", UNSET))

        def _parse_replica(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        replica = _parse_replica(d.pop("replica", UNSET))

        leader_status = cls(
            token=token,
            address=address,
            replica=replica,
        )

        leader_status.additional_properties = d
        return leader_status

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
