from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.leader_status import LeaderStatus
    from ..models.replica_status import ReplicaStatus


T = TypeVar("T", bound="ClusterStatus")


@_attrs_define
class ClusterStatus:
    """`GET /v1/cluster`: the replica that answered, the leader, every live replica.

    Attributes:
        is_leader (bool): That replica leads.
        leader (LeaderStatus): The leader lease as a replica sees it.
        leadership_changes (int): Changes of leadership the answering replica has seen since it started.
        lease_renew_ms (int):
        lease_ttl_ms (int): Lease period and renewal interval, in ms.
        replica (str): The replica that answered this request.
        replicas (list[ReplicaStatus]):
    """

    is_leader: bool
    leader: LeaderStatus
    leadership_changes: int
    lease_renew_ms: int
    lease_ttl_ms: int
    replica: str
    replicas: list[ReplicaStatus]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        is_leader = self.is_leader

        leader = self.leader.to_dict()

        leadership_changes = self.leadership_changes

        lease_renew_ms = self.lease_renew_ms

        lease_ttl_ms = self.lease_ttl_ms

        replica = self.replica

        replicas = []
        for replicas_item_data in self.replicas:
            replicas_item = replicas_item_data.to_dict()
            replicas.append(replicas_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "is_leader": is_leader,
                "leader": leader,
                "leadership_changes": leadership_changes,
                "lease_renew_ms": lease_renew_ms,
                "lease_ttl_ms": lease_ttl_ms,
                "replica": replica,
                "replicas": replicas,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.leader_status import LeaderStatus  # noqa: PLC0415
        from ..models.replica_status import ReplicaStatus  # noqa: PLC0415

        d = dict(src_dict)
        is_leader = d.pop("is_leader")

        leader = LeaderStatus.from_dict(d.pop("leader"))

        leadership_changes = d.pop("leadership_changes")

        lease_renew_ms = d.pop("lease_renew_ms")

        lease_ttl_ms = d.pop("lease_ttl_ms")

        replica = d.pop("replica")

        replicas = []
        _replicas = d.pop("replicas")
        for replicas_item_data in _replicas:
            replicas_item = ReplicaStatus.from_dict(replicas_item_data)

            replicas.append(replicas_item)

        cluster_status = cls(
            is_leader=is_leader,
            leader=leader,
            leadership_changes=leadership_changes,
            lease_renew_ms=lease_renew_ms,
            lease_ttl_ms=lease_ttl_ms,
            replica=replica,
            replicas=replicas,
        )

        cluster_status.additional_properties = d
        return cluster_status

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
