from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.scaling_event import ScalingEvent


T = TypeVar("T", bound="ScalingEvents")


@_attrs_define
class ScalingEvents:
    """
    Attributes:
        app (str):
        events (list[ScalingEvent]):
    """

    app: str
    events: list[ScalingEvent]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        app = self.app

        events = []
        for events_item_data in self.events:
            events_item = events_item_data.to_dict()
            events.append(events_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "app": app,
                "events": events,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.scaling_event import ScalingEvent  # noqa: PLC0415

        d = dict(src_dict)
        app = d.pop("app")

        events = []
        _events = d.pop("events")
        for events_item_data in _events:
            events_item = ScalingEvent.from_dict(events_item_data)

            events.append(events_item)

        scaling_events = cls(
            app=app,
            events=events,
        )

        scaling_events.additional_properties = d
        return scaling_events

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
