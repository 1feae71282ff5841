from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PlanBody")


@_attrs_define
class PlanBody:
    """What to plan a pipeline on.

    Attributes:
        apply (bool | Unset): Store the plan (queries then run each node on the plan's model) and load its replicas.
        generate (None | str | Unset): A workload generator for the planning trace (the `infaas sim --generate` syntax),
            e.g.
            `poisson:rate=100,duration=600`.
        trace_csv (None | str | Unset): A planning trace in the documented CSV format
            (`time_ms,app,slo_ms,min_accuracy`);
            every arrival counts as a pipeline query.
    """

    apply: bool | Unset = UNSET
    generate: None | str | Unset = UNSET
    trace_csv: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        apply = self.apply

        generate: None | str | Unset
        if isinstance(self.generate, Unset):
            generate = UNSET
        else:
            generate = self.generate

        trace_csv: None | str | Unset
        if isinstance(self.trace_csv, Unset):
            trace_csv = UNSET
        else:
            trace_csv = self.trace_csv

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if apply is not UNSET:
            field_dict["apply"] = apply
        if generate is not UNSET:
            field_dict["generate"] = generate
        if trace_csv is not UNSET:
            field_dict["trace_csv"] = trace_csv

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        apply = d.pop("apply", UNSET)

        def _parse_generate(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        generate = _parse_generate(d.pop("generate", UNSET))

        def _parse_trace_csv(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        trace_csv = _parse_trace_csv(d.pop("trace_csv", UNSET))

        plan_body = cls(
            apply=apply,
            generate=generate,
            trace_csv=trace_csv,
        )

        plan_body.additional_properties = d
        return plan_body

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
