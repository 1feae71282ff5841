from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="WhatIfCluster")


@_attrs_define
class WhatIfCluster:
    """The simulated cluster.

    Attributes:
        cpu_cores (int):
        cpu_workers (int):
        gpu_workers (int):
        slack (float):
        variants (int): The tenant's profiled variants the run could use.
    """

    cpu_cores: int
    cpu_workers: int
    gpu_workers: int
    slack: float
    variants: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cpu_cores = self.cpu_cores

        cpu_workers = self.cpu_workers

        gpu_workers = self.gpu_workers

        slack = self.slack

        variants = self.variants

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cpu_cores": cpu_cores,
                "cpu_workers": cpu_workers,
                "gpu_workers": gpu_workers,
                "slack": slack,
                "variants": variants,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cpu_cores = d.pop("cpu_cores")

        cpu_workers = d.pop("cpu_workers")

        gpu_workers = d.pop("gpu_workers")

        slack = d.pop("slack")

        variants = d.pop("variants")

        what_if_cluster = cls(
            cpu_cores=cpu_cores,
            cpu_workers=cpu_workers,
            gpu_workers=gpu_workers,
            slack=slack,
            variants=variants,
        )

        what_if_cluster.additional_properties = d
        return what_if_cluster

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
