from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Readiness")


@_attrs_define
class Readiness:
    """
    Attributes:
        database (str): `ok` or the error of the database check.
        leader (bool): This replica holds the leader lease (runs the cluster's autoscaling, tuner and
            overload loops); every replica serves queries alike.
        object_store (str): `ok` or the error of the object-store check.
        replica (str): This controller replica's id.
        status (str): `ready` or `not_ready`.
        workers (str): `ok`, or why this controller cannot serve queries yet (it started moments ago and no
            worker that can host instances has reported to it).
    """

    database: str
    leader: bool
    object_store: str
    replica: str
    status: str
    workers: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        database = self.database

        leader = self.leader

        object_store = self.object_store

        replica = self.replica

        status = self.status

        workers = self.workers

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "database": database,
                "leader": leader,
                "object_store": object_store,
                "replica": replica,
                "status": status,
                "workers": workers,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        database = d.pop("database")

        leader = d.pop("leader")

        object_store = d.pop("object_store")

        replica = d.pop("replica")

        status = d.pop("status")

        workers = d.pop("workers")

        readiness = cls(
            database=database,
            leader=leader,
            object_store=object_store,
            replica=replica,
            status=status,
            workers=workers,
        )

        readiness.additional_properties = d
        return readiness

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
