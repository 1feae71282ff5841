from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.latency_view import LatencyView


T = TypeVar("T", bound="VariantView")


@_attrs_define
class VariantView:
    """
    Attributes:
        file (str): Which file: `source`, `optimized` (ONNX Runtime graph optimisations), `int8`, `fp16`.
        hardware (str): `cpu` or `gpu`.
        latency (list[LatencyView]):
        max_batch (int):
        name (str): `{model}.{fp32|opt|int8|fp16}.{cpu|gpu}.t{threads}.b{max_batch}`.
        precision (str): `fp32`, `int8` or `fp16`.
        status (str): `pending`, `profiled` or `failed`.
        threads (int): Intra-op threads.
        accuracy (float | None | Unset): Top-1 accuracy on the validation set, in [0, 1].
        load_ms (float | None | Unset):
        memory_bytes (int | None | Unset):
    """

    file: str
    hardware: str
    latency: list[LatencyView]
    max_batch: int
    name: str
    precision: str
    status: str
    threads: int
    accuracy: float | None | Unset = UNSET
    load_ms: float | None | Unset = UNSET
    memory_bytes: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        file = self.file

        hardware = self.hardware

        latency = []
        for latency_item_data in self.latency:
            latency_item = latency_item_data.to_dict()
            latency.append(latency_item)

        max_batch = self.max_batch

        name = self.name

        precision = self.precision

        status = self.status

        threads = self.threads

        accuracy: float | None | Unset
        if isinstance(self.accuracy, Unset):
            accuracy = UNSET
        else:
            accuracy = self.accuracy

        load_ms: float | None | Unset
        if isinstance(self.load_ms, Unset):
            load_ms = UNSET
        else:
            load_ms = self.load_ms

        memory_bytes: int | None | Unset
        if isinstance(self.memory_bytes, Unset):
            memory_bytes = UNSET
        else:
            memory_bytes = self.memory_bytes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "file": file,
                "hardware": hardware,
                "latency": latency,
                "max_batch": max_batch,
                "name": name,
                "precision": precision,
                "status": status,
                "threads": threads,
            }
        )
        if accuracy is not UNSET:
            field_dict["accuracy"] = accuracy
        if load_ms is not UNSET:
            field_dict["load_ms"] = load_ms
        if memory_bytes is not UNSET:
            field_dict["memory_bytes"] = memory_bytes

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.latency_view import LatencyView  # noqa: PLC0415

        d = dict(src_dict)
        file = d.pop("file")

        hardware = d.pop("hardware")

        latency = []
        _latency = d.pop("latency")
        for latency_item_data in _latency:
            latency_item = LatencyView.from_dict(latency_item_data)

            latency.append(latency_item)

        max_batch = d.pop("max_batch")

        name = d.pop("name")

        precision = d.pop("precision")

        status = d.pop("status")

        threads = d.pop("threads")

        def _parse_accuracy(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        accuracy = _parse_accuracy(d.pop("accuracy", UNSET))

        def _parse_load_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        load_ms = _parse_load_ms(d.pop("load_ms", UNSET))

        def _parse_memory_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        memory_bytes = _parse_memory_bytes(d.pop("memory_bytes", UNSET))

        variant_view = cls(
            file=file,
            hardware=hardware,
            latency=latency,
            max_batch=max_batch,
            name=name,
            precision=precision,
            status=status,
            threads=threads,
            accuracy=accuracy,
            load_ms=load_ms,
            memory_bytes=memory_bytes,
        )

        variant_view.additional_properties = d
        return variant_view

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
