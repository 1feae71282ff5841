from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ScalingEvent")


@_attrs_define
class ScalingEvent:
    """
    Attributes:
        action (str): `replicate`, `upgrade`, `downgrade`, `remove-replica`, `add-threads`, `remove-threads`,
            `rebalance`,
            `migrate`, `add-worker`, `remove-worker`, and `load-for-queries` (a load the query path
            started for queries no loaded instance could answer in time); a failed action ends in
            `-failed`.
        at_ms (int): When the action completed (or failed), milliseconds since the Unix epoch.
        id (str):
        reason (str): Why, with the figures the decision was taken on.
        cost_after_per_s (float | None | Unset):
        cost_before_per_s (float | None | Unset): Price per second of the resources concerned before the action (the
            model's instances
            for model actions, the instance for vertical ones, the fleet for worker ones).
        variant (None | str | Unset): The variant loaded (or removed).
        worker (None | str | Unset): The worker the action ran on (or the worker added or removed).
    """

    action: str
    at_ms: int
    id: str
    reason: str
    cost_after_per_s: float | None | Unset = UNSET
    cost_before_per_s: float | None | Unset = UNSET
    variant: None | str | Unset = UNSET
    worker: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        action = self.action

        at_ms = self.at_ms

        id = self.id

        reason = self.reason

        cost_after_per_s: float | None | Unset
        if isinstance(self.cost_after_per_s, Unset):
            cost_after_per_s = UNSET
        else:
            cost_after_per_s = self.cost_after_per_s

        cost_before_per_s: float | None | Unset
        if isinstance(self.cost_before_per_s, Unset):
            cost_before_per_s = UNSET
        else:
            cost_before_per_s = self.cost_before_per_s

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
                "action": action,
                "at_ms": at_ms,
                "id": id,
                "reason": reason,
            }
        )
        if cost_after_per_s is not UNSET:
            field_dict["cost_after_per_s"] = cost_after_per_s
        if cost_before_per_s is not UNSET:
            field_dict["cost_before_per_s"] = cost_before_per_s
        if variant is not UNSET:
            field_dict["variant"] = variant
        if worker is not UNSET:
            field_dict["worker"] = worker

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        action = d.pop("action")

        at_ms = d.pop("at_ms")

        id = d.pop("id")

        reason = d.pop("reason")

        def _parse_cost_after_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        cost_after_per_s = _parse_cost_after_per_s(d.pop("cost_after_per_s", UNSET))

        def _parse_cost_before_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        cost_before_per_s = _parse_cost_before_per_s(d.pop("cost_before_per_s", UNSET))

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

        scaling_event = cls(
            action=action,
            at_ms=at_ms,
            id=id,
            reason=reason,
            cost_after_per_s=cost_after_per_s,
            cost_before_per_s=cost_before_per_s,
            variant=variant,
            worker=worker,
        )

        scaling_event.additional_properties = d
        return scaling_event

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
