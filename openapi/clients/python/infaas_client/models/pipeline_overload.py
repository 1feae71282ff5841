from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PipelineOverload")


@_attrs_define
class PipelineOverload:
    """A pipeline's behaviour under overload.

    Attributes:
        accuracy_scaling (bool | Unset): Loki's accuracy scaling: every 10 s the controller allocates the most accurate
            mix of
            the nodes' variants that carries the demand (hardware scaling first), and every query is
            routed along it most-accurate-first (off by default).
        early_dropping (bool | Unset): A query that can no longer meet its end-to-end deadline is dropped at once,
            before it
            spends downstream capacity, with an answer that says so (on by default; with
            `accuracy_scaling`, it is first rerouted to a faster variant when one makes it).
    """

    accuracy_scaling: bool | Unset = UNSET
    early_dropping: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        accuracy_scaling = self.accuracy_scaling

        early_dropping = self.early_dropping

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if accuracy_scaling is not UNSET:
            field_dict["accuracy_scaling"] = accuracy_scaling
        if early_dropping is not UNSET:
            field_dict["early_dropping"] = early_dropping

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        accuracy_scaling = d.pop("accuracy_scaling", UNSET)

        early_dropping = d.pop("early_dropping", UNSET)

        pipeline_overload = cls(
            accuracy_scaling=accuracy_scaling,
            early_dropping=early_dropping,
        )

        return pipeline_overload
