from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="TraceSourceType2")


@_attrs_define
class TraceSourceType2:
    """A workload generator, `KIND:key=value,...`, e.g.
    `poisson:rate=50,duration=60,app=digits,slo=100` (kinds `poisson`, `gamma`, `step`,
    `burst`, `diurnal`; docs/simulator.md, "Workloads"); at most 1,000 characters.

        Attributes:
            generate (str): A workload generator, `KIND:key=value,...`, e.g.
                `poisson:rate=50,duration=60,app=digits,slo=100` (kinds `poisson`, `gamma`, `step`,
                `burst`, `diurnal`; docs/simulator.md, "Workloads"); at most 1,000 characters.
    """

    generate: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        generate = self.generate

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "generate": generate,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        generate = d.pop("generate")

        trace_source_type_2 = cls(
            generate=generate,
        )

        trace_source_type_2.additional_properties = d
        return trace_source_type_2

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
