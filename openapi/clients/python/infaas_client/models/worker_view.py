from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_view import GpuView
    from ..models.instance_view import InstanceView
    from ..models.loading_view import LoadingView


T = TypeVar("T", bound="WorkerView")


@_attrs_define
class WorkerView:
    """
    Attributes:
        alive (bool):
        busy_threads (int): Intra-op threads of the worker's busy CPU instances, every tenant's (served within the
            last 5 s, or with rows queued or a batch running): capacity is counted in cores, and
            no load for queries nor added threads take this above `cores`.
        cores (int):
        gpus (list[GpuView]): The worker's GPUs (at most one for now); a simulated one runs GPU variants on the CPU
            and answers after the latency of a measured profile.
        hardware (list[str]):
        id (str):
        instances (list[InstanceView]): The caller's instances on this worker (other tenants' are not shown).
        last_heartbeat_ms_ago (int):
        memory_budget_bytes (int):
        memory_used_bytes (int):
        name (str):
        own_utilisation (float): The worker process's own CPU time as a fraction of its cores, in [0, 1] (its instances
            and, for the embedded worker, the controller's serving edge): at
            `autoscale`'s self-contention mark (0.85) a slow instance there is not interference.
        thread_budget (int):
        threads_used (int):
        utilisation (float): Busy fraction of the cores, in [0, 1].
        address (None | str | Unset):
        loading (list[LoadingView] | Unset): The caller's variants being loaded on this worker for queries that wait for
            them, the
            oldest first (other tenants' are not shown). A load leaves this list when its instance
            appears in `instances`, or when it fails.
    """

    alive: bool
    busy_threads: int
    cores: int
    gpus: list[GpuView]
    hardware: list[str]
    id: str
    instances: list[InstanceView]
    last_heartbeat_ms_ago: int
    memory_budget_bytes: int
    memory_used_bytes: int
    name: str
    own_utilisation: float
    thread_budget: int
    threads_used: int
    utilisation: float
    address: None | str | Unset = UNSET
    loading: list[LoadingView] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        alive = self.alive

        busy_threads = self.busy_threads

        cores = self.cores

        gpus = []
        for gpus_item_data in self.gpus:
            gpus_item = gpus_item_data.to_dict()
            gpus.append(gpus_item)

        hardware = self.hardware

        id = self.id

        instances = []
        for instances_item_data in self.instances:
            instances_item = instances_item_data.to_dict()
            instances.append(instances_item)

        last_heartbeat_ms_ago = self.last_heartbeat_ms_ago

        memory_budget_bytes = self.memory_budget_bytes

        memory_used_bytes = self.memory_used_bytes

        name = self.name

        own_utilisation = self.own_utilisation

        thread_budget = self.thread_budget

        threads_used = self.threads_used

        utilisation = self.utilisation

        address: None | str | Unset
        if isinstance(self.address, Unset):
            address = UNSET
        else:
            address = self.address

        loading: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.loading, Unset):
            loading = []
            for loading_item_data in self.loading:
                loading_item = loading_item_data.to_dict()
                loading.append(loading_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "alive": alive,
                "busy_threads": busy_threads,
                "cores": cores,
                "gpus": gpus,
                "hardware": hardware,
                "id": id,
                "instances": instances,
                "last_heartbeat_ms_ago": last_heartbeat_ms_ago,
                "memory_budget_bytes": memory_budget_bytes,
                "memory_used_bytes": memory_used_bytes,
                "name": name,
                "own_utilisation": own_utilisation,
                "thread_budget": thread_budget,
                "threads_used": threads_used,
                "utilisation": utilisation,
            }
        )
        if address is not UNSET:
            field_dict["address"] = address
        if loading is not UNSET:
            field_dict["loading"] = loading

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.gpu_view import GpuView  # noqa: PLC0415
        from ..models.instance_view import InstanceView  # noqa: PLC0415
        from ..models.loading_view import LoadingView  # noqa: PLC0415

        d = dict(src_dict)
        alive = d.pop("alive")

        busy_threads = d.pop("busy_threads")

        cores = d.pop("cores")

        gpus = []
        _gpus = d.pop("gpus")
        for gpus_item_data in _gpus:
            gpus_item = GpuView.from_dict(gpus_item_data)

            gpus.append(gpus_item)

        hardware = cast(list[str], d.pop("hardware"))

        id = d.pop("id")

        instances = []
        _instances = d.pop("instances")
        for instances_item_data in _instances:
            instances_item = InstanceView.from_dict(instances_item_data)

            instances.append(instances_item)

        last_heartbeat_ms_ago = d.pop("last_heartbeat_ms_ago")

        memory_budget_bytes = d.pop("memory_budget_bytes")

        memory_used_bytes = d.pop("memory_used_bytes")

        name = d.pop("name")

        own_utilisation = d.pop("own_utilisation")

        thread_budget = d.pop("thread_budget")

        threads_used = d.pop("threads_used")

        utilisation = d.pop("utilisation")

        def _parse_address(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        address = _parse_address(d.pop("address", UNSET))

        _loading = d.pop("loading", UNSET)
        loading: list[LoadingView] | Unset = UNSET
        if _loading is not UNSET:
            loading = []
            for loading_item_data in _loading:
                loading_item = LoadingView.from_dict(loading_item_data)

                loading.append(loading_item)

        worker_view = cls(
            alive=alive,
            busy_threads=busy_threads,
            cores=cores,
            gpus=gpus,
            hardware=hardware,
            id=id,
            instances=instances,
            last_heartbeat_ms_ago=last_heartbeat_ms_ago,
            memory_budget_bytes=memory_budget_bytes,
            memory_used_bytes=memory_used_bytes,
            name=name,
            own_utilisation=own_utilisation,
            thread_budget=thread_budget,
            threads_used=threads_used,
            utilisation=utilisation,
            address=address,
            loading=loading,
        )

        worker_view.additional_properties = d
        return worker_view

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
