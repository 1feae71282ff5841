from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="NodeRunView")


@_attrs_define
class NodeRunView:
    """What one node did for the query.

    Attributes:
        kind (str): `app`, `model`, or the combiner (`mean`, `vote`, `concat`, `first`).
        latency_ms (float):
        node (str):
        reason (str): Why this variant (or why the node was skipped).
        rows (int): Rows of the request the node ran on; 0 when a switch skipped it.
        accuracy (float | None | Unset):
        budget_ms (float | None | Unset): The node's latency budget (ms) when it started: what was left of the SLO,
            shared over
            the model nodes still ahead.
        hardware (None | str | Unset):
        model (None | str | Unset):
        variant (None | str | Unset):
        worker (None | str | Unset):
    """

    kind: str
    latency_ms: float
    node: str
    reason: str
    rows: int
    accuracy: float | None | Unset = UNSET
    budget_ms: float | None | Unset = UNSET
    hardware: None | str | Unset = UNSET
    model: None | str | Unset = UNSET
    variant: None | str | Unset = UNSET
    worker: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        kind = self.kind

        latency_ms = self.latency_ms

        node = self.node

        reason = self.reason

        rows = self.rows

        accuracy: float | None | Unset
        if isinstance(self.accuracy, Unset):
            accuracy = UNSET
        else:
            accuracy = self.accuracy

        budget_ms: float | None | Unset
        if isinstance(self.budget_ms, Unset):
            budget_ms = UNSET
        else:
            budget_ms = self.budget_ms

        hardware: None | str | Unset
        if isinstance(self.hardware, Unset):
            hardware = UNSET
        else:
            hardware = self.hardware

        model: None | str | Unset
        if isinstance(self.model, Unset):
            model = UNSET
        else:
            model = self.model

        variant: None | str | Unset
        if isinstance(self.variant, Unset):
            variant = UNSET
        else:
            variant = self.variant

        worker: None | str | Unset
        if isinstance(self.worker, Unset):
            worker = UNSET
        else:
            worker = self.worker

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "kind": kind,
                "latency_ms": latency_ms,
                "node": node,
                "reason": reason,
                "rows": rows,
            }
        )
        if accuracy is not UNSET:
            field_dict["accuracy"] = accuracy
        if budget_ms is not UNSET:
            field_dict["budget_ms"] = budget_ms
        if hardware is not UNSET:
            field_dict["hardware"] = hardware
        if model is not UNSET:
            field_dict["model"] = model
        if variant is not UNSET:
            field_dict["variant"] = variant
        if worker is not UNSET:
            field_dict["worker"] = worker

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        kind = d.pop("kind")

        latency_ms = d.pop("latency_ms")

        node = d.pop("node")

        reason = d.pop("reason")

        rows = d.pop("rows")

        def _parse_accuracy(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        accuracy = _parse_accuracy(d.pop("accuracy", UNSET))

        def _parse_budget_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        budget_ms = _parse_budget_ms(d.pop("budget_ms", UNSET))

        def _parse_hardware(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        hardware = _parse_hardware(d.pop("hardware", UNSET))

        def _parse_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model = _parse_model(d.pop("model", UNSET))

        def _parse_variant(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        variant = _parse_variant(d.pop("variant", UNSET))

        def _parse_worker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        worker = _parse_worker(d.pop("worker", UNSET))

        node_run_view = cls(
            kind=kind,
            latency_ms=latency_ms,
            node=node,
            reason=reason,
            rows=rows,
            accuracy=accuracy,
            budget_ms=budget_ms,
            hardware=hardware,
            model=model,
            variant=variant,
            worker=worker,
        )

        node_run_view.additional_properties = d
        return node_run_view

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
