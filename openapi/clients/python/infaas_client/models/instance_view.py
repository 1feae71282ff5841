from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="InstanceView")


@_attrs_define
class InstanceView:
    """
    Attributes:
        batch_histogram (list[list[int]]): Batch sizes served: `[batch rows, count]`.
        busy (bool): Whether its threads count in the worker's `busy_threads`.
        exec_p50_ms (float): Session run time per batch over the last 1,000 runs (the service time; the rest of
            `latency_*` is waiting in the queue and on the way there), in ms.
        exec_p99_ms (float):
        latency_p50_ms (float):
        latency_p99_ms (float):
        max_batch (int):
        qps (float): Rows served per second over the last window.
        queue_rows (int):
        requests_total (int):
        state (str): `active`, `overloaded`, `interfered` or `inactive`.
        threads (int):
        variant (str):
    """

    batch_histogram: list[list[int]]
    busy: bool
    exec_p50_ms: float
    exec_p99_ms: float
    latency_p50_ms: float
    latency_p99_ms: float
    max_batch: int
    qps: float
    queue_rows: int
    requests_total: int
    state: str
    threads: int
    variant: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        batch_histogram = []
        for batch_histogram_item_data in self.batch_histogram:
            batch_histogram_item = batch_histogram_item_data

            batch_histogram.append(batch_histogram_item)

        busy = self.busy

        exec_p50_ms = self.exec_p50_ms

        exec_p99_ms = self.exec_p99_ms

        latency_p50_ms = self.latency_p50_ms

        latency_p99_ms = self.latency_p99_ms

        max_batch = self.max_batch

        qps = self.qps

        queue_rows = self.queue_rows

        requests_total = self.requests_total

        state = self.state

        threads = self.threads

        variant = self.variant

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "batch_histogram": batch_histogram,
                "busy": busy,
                "exec_p50_ms": exec_p50_ms,
                "exec_p99_ms": exec_p99_ms,
                "latency_p50_ms": latency_p50_ms,
                "latency_p99_ms": latency_p99_ms,
                "max_batch": max_batch,
                "qps": qps,
                "queue_rows": queue_rows,
                "requests_total": requests_total,
                "state": state,
                "threads": threads,
                "variant": variant,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        batch_histogram = []
        _batch_histogram = d.pop("batch_histogram")
        for batch_histogram_item_data in _batch_histogram:
            batch_histogram_item = cast(list[int], batch_histogram_item_data)

            batch_histogram.append(batch_histogram_item)

        busy = d.pop("busy")

        exec_p50_ms = d.pop("exec_p50_ms")

        exec_p99_ms = d.pop("exec_p99_ms")

        latency_p50_ms = d.pop("latency_p50_ms")

        latency_p99_ms = d.pop("latency_p99_ms")

        max_batch = d.pop("max_batch")

        qps = d.pop("qps")

        queue_rows = d.pop("queue_rows")

        requests_total = d.pop("requests_total")

        state = d.pop("state")

        threads = d.pop("threads")

        variant = d.pop("variant")

        instance_view = cls(
            batch_histogram=batch_histogram,
            busy=busy,
            exec_p50_ms=exec_p50_ms,
            exec_p99_ms=exec_p99_ms,
            latency_p50_ms=latency_p50_ms,
            latency_p99_ms=latency_p99_ms,
            max_batch=max_batch,
            qps=qps,
            queue_rows=queue_rows,
            requests_total=requests_total,
            state=state,
            threads=threads,
            variant=variant,
        )

        instance_view.additional_properties = d
        return instance_view

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
