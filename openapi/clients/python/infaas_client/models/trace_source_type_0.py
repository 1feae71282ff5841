from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.recorded_trace import RecordedTrace


T = TypeVar("T", bound="TraceSourceType0")


@_attrs_define
class TraceSourceType0:
    """The tenant's own traffic as the platform recorded it (`GET /v1/traces/recorded`).

    Attributes:
        recorded (RecordedTrace): The tenant's recorded traffic over the last `minutes`.
    """

    recorded: RecordedTrace
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        recorded = self.recorded.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "recorded": recorded,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.recorded_trace import RecordedTrace  # noqa: PLC0415

        d = dict(src_dict)
        recorded = RecordedTrace.from_dict(d.pop("recorded"))

        trace_source_type_0 = cls(
            recorded=recorded,
        )

        trace_source_type_0.additional_properties = d
        return trace_source_type_0

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
